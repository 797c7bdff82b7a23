//! [`ServiceInstance`]: one registered instance of a service, with the fields curator-x-discovery
//! gives it, and what they may hold.
//!
//! Owns: the instance, its [`ServiceType`], its [`Payload`] and [`UriSpec`], and the rules an
//! instance must follow to be written (so that no Curator reader ever meets one it cannot read).
//! Does not own the bytes: `format.rs` turns an instance into Curator's JSON and back.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value};

use super::error::DiscoveryError;
use crate::path;
use crate::session::requests::CreateMode;

/// How long a registration lives, as Curator's `ServiceType` (written in upper case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ServiceType {
    /// An ephemeral node: the instance goes with its session (the process). The default.
    #[default]
    Dynamic,
    /// A persistent node, deleted when unregistered.
    Static,
    /// A persistent node, deleted when unregistered (Curator makes no other difference).
    Permanent,
    /// An ephemeral sequential node `<id>NNNNNNNNNN` (protected: `_c_<guid>-<id>NNNNNNNNNN`).
    DynamicSequential,
}

impl ServiceType {
    /// The name Curator writes: `DYNAMIC`, `STATIC`, `PERMANENT`, `DYNAMIC_SEQUENTIAL`.
    pub fn as_str(self) -> &'static str {
        match self {
            ServiceType::Dynamic => "DYNAMIC",
            ServiceType::Static => "STATIC",
            ServiceType::Permanent => "PERMANENT",
            ServiceType::DynamicSequential => "DYNAMIC_SEQUENTIAL",
        }
    }

    /// The type named `name` as Curator writes it.
    pub fn parse(name: &str) -> Option<ServiceType> {
        [ServiceType::Dynamic, ServiceType::Static, ServiceType::Permanent, ServiceType::DynamicSequential]
            .into_iter()
            .find(|t| t.as_str() == name)
    }

    /// Whether the instance goes with its session.
    pub fn is_dynamic(self) -> bool {
        matches!(self, ServiceType::Dynamic | ServiceType::DynamicSequential)
    }

    /// The create mode of its node, as Curator chooses it.
    pub(crate) fn create_mode(self) -> CreateMode {
        match self {
            ServiceType::Dynamic => CreateMode::Ephemeral,
            ServiceType::DynamicSequential => CreateMode::EphemeralSequential,
            ServiceType::Static | ServiceType::Permanent => CreateMode::Persistent,
        }
    }
}

/// The class Curator's readers are given for a map payload when the user names none.
pub const DEFAULT_PAYLOAD_CLASS: &str = "java.util.LinkedHashMap";

/// An instance's payload: what Curator's `ServiceInstance<T>` carries as `T`.
///
/// Curator writes a payload with Jackson's type information: an object payload carries its Java
/// class as its first property (`"@class":"java.util.LinkedHashMap"`), a string is written bare.
/// A Curator reader fails on a payload that is not of the class it was built for (and then on
/// the whole service), so services shared with Java agree on one payload shape.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Payload {
    /// No payload (`null`).
    #[default]
    None,
    /// A JSON object, typed as the Java class `class` (a `Map` or a bean with these fields).
    Object {
        /// The Java class name Curator's readers are told (`@class`).
        class: String,
        /// The object's fields, without `@class`.
        fields: Map<String, Value>,
    },
    /// A string (Curator's `ServiceInstance<String>`).
    Text(String),
    /// What Curator wrote that is none of the above (a number, a boolean, an array with its
    /// type): read as it is, never written by this crate.
    Other(Value),
}

impl Payload {
    /// A map payload, typed `java.util.LinkedHashMap` (what Curator writes for a `Map`).
    pub fn map(fields: Map<String, Value>) -> Payload {
        Payload::object(DEFAULT_PAYLOAD_CLASS, fields)
    }

    /// An object payload typed as the Java class `class` (a `Map` or a bean Curator's readers
    /// have on their classpath).
    pub fn object(class: impl Into<String>, fields: Map<String, Value>) -> Payload {
        Payload::Object { class: class.into(), fields }
    }

    /// A string payload.
    pub fn text(text: impl Into<String>) -> Payload {
        Payload::Text(text.into())
    }

    fn validate(&self) -> Result<(), &'static str> {
        match self {
            Payload::None | Payload::Text(_) => Ok(()),
            Payload::Object { class, fields } => {
                if !is_java_class_name(class) {
                    return Err("its class is not a Java class name (e.g. java.util.LinkedHashMap)");
                }
                if fields.contains_key("@class") {
                    return Err("it has a field named @class, which Curator reads as the type");
                }
                Ok(())
            }
            Payload::Other(_) => Err("only none, an object or a string can be written"),
        }
    }
}

/// `a.b.C`, `C$Inner`: segments of Java identifier characters, separated by dots.
fn is_java_class_name(class: &str) -> bool {
    !class.is_empty()
        && class.split('.').all(|segment| {
            let mut chars = segment.chars();
            chars.next().is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
                && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
        })
}

/// One part of a [`UriSpec`]: text, or a variable to replace.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UriPart {
    /// The text, or the variable's name.
    pub value: String,
    /// Whether it is a variable (`{name}` in the template).
    pub variable: bool,
}

/// Curator's `UriSpec`: a template such as `{scheme}://{address}:{port}`, kept as its parts.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct UriSpec {
    parts: Vec<UriPart>,
}

impl UriSpec {
    /// Parses a template as Curator does: `{name}` is a variable (its name trimmed), the rest is
    /// text. [`DiscoveryError::InvalidInstance`] for an unbalanced brace.
    pub fn parse(template: &str) -> Result<UriSpec, DiscoveryError> {
        let invalid = |reason| DiscoveryError::InvalidInstance { field: "uri_spec", reason };
        let mut parts = Vec::new();
        let mut inside = false;
        let mut token = String::new();
        let flush = |token: &mut String, inside: bool, parts: &mut Vec<UriPart>| {
            if !token.is_empty() {
                let value = if inside { token.trim().to_owned() } else { std::mem::take(token) };
                token.clear();
                parts.push(UriPart { value, variable: inside });
            }
        };
        for c in template.chars() {
            match c {
                '{' if inside => return Err(invalid("'{' inside a variable")),
                '}' if !inside => return Err(invalid("'}' without '{'")),
                '{' | '}' => {
                    flush(&mut token, inside, &mut parts);
                    inside = c == '{';
                }
                c => token.push(c),
            }
        }
        if inside {
            return Err(invalid("a variable is not closed with '}'"));
        }
        flush(&mut token, inside, &mut parts);
        Ok(UriSpec { parts })
    }

    /// The spec made of `parts` (as read from Curator's JSON).
    pub fn from_parts(parts: Vec<UriPart>) -> UriSpec {
        UriSpec { parts }
    }

    /// Its parts, in order.
    pub fn parts(&self) -> &[UriPart] {
        &self.parts
    }

    /// The URI for `instance`, as Curator's `buildUriSpec()`: `scheme` is `https` when the
    /// instance has an SSL port, else `http`; `name`, `id`, `address`, `port`, `ssl-port`,
    /// `registration-time-utc` and `service-type` are the instance's; `[` and `]` are braces.
    /// An unknown variable, or a field the instance lacks, is left out.
    pub fn build(&self, instance: &ServiceInstance) -> String {
        let mut uri = String::new();
        for part in &self.parts {
            if !part.variable {
                uri.push_str(&part.value);
                continue;
            }
            let value = match part.value.as_str() {
                "[" => Some("{".to_owned()),
                "]" => Some("}".to_owned()),
                "scheme" => Some(if instance.ssl_port.is_some() { "https" } else { "http" }.to_owned()),
                "name" => Some(instance.name.clone()),
                "id" => Some(instance.id.clone()),
                "address" => instance.address.clone(),
                "port" => instance.port.map(|p| p.to_string()),
                "ssl-port" => instance.ssl_port.map(|p| p.to_string()),
                "registration-time-utc" => Some(instance.registration_time_utc.to_string()),
                "service-type" => Some(instance.service_type.as_str().to_lowercase()),
                _ => None,
            };
            uri.push_str(value.as_deref().unwrap_or(""));
        }
        uri
    }
}

/// One instance of a service, as curator-x-discovery's `ServiceInstance`.
///
/// ```
/// use actix_zookeeper::discovery::{Payload, ServiceInstance, UriSpec};
///
/// let mut fields = serde_json::Map::new();
/// fields.insert("zone".into(), "eu-1".into());
/// let instance = ServiceInstance::new("billing", "host-a")
///     .with_address("10.0.0.7")
///     .with_port(8080)
///     .with_payload(Payload::map(fields))
///     .with_uri_spec(UriSpec::parse("{scheme}://{address}:{port}").unwrap());
/// assert_eq!(instance.uri().as_deref(), Some("http://10.0.0.7:8080"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServiceInstance {
    /// The service's name: its node is `<base>/<name>/<id>`.
    pub name: String,
    /// The instance's id, unique within the service.
    pub id: String,
    /// Where it listens (a host name or an address).
    pub address: Option<String>,
    /// Its port.
    pub port: Option<u16>,
    /// Its TLS port.
    pub ssl_port: Option<u16>,
    /// What else it tells its clients.
    pub payload: Payload,
    /// When it was registered, in milliseconds since the Unix epoch.
    pub registration_time_utc: i64,
    /// How long its registration lives.
    pub service_type: ServiceType,
    /// How to reach it.
    pub uri_spec: Option<UriSpec>,
    /// Whether providers may pick it (Curator's providers skip a disabled instance).
    pub enabled: bool,
}

impl ServiceInstance {
    /// Instance `id` of service `name`: registered now, [`ServiceType::Dynamic`], enabled, with
    /// no address, port or payload.
    pub fn new(name: impl Into<String>, id: impl Into<String>) -> ServiceInstance {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64);
        ServiceInstance {
            name: name.into(),
            id: id.into(),
            address: None,
            port: None,
            ssl_port: None,
            payload: Payload::None,
            registration_time_utc: now,
            service_type: ServiceType::Dynamic,
            uri_spec: None,
            enabled: true,
        }
    }

    crate::builder::setters! {
        /// Its address.
        #[must_use]
        with_address(address: impl Into<String>) => some into;

        /// Its port.
        #[must_use]
        with_port(port: u16) => some;

        /// Its TLS port.
        #[must_use]
        with_ssl_port(ssl_port: u16) => some;

        /// Its payload.
        #[must_use]
        with_payload(payload: Payload);

        /// Its service type.
        #[must_use]
        with_service_type(service_type: ServiceType);

        /// Its URI spec.
        #[must_use]
        with_uri_spec(uri_spec: UriSpec) => some;

        /// Whether providers may pick it.
        #[must_use]
        with_enabled(enabled: bool);

        /// Its registration time (milliseconds since the Unix epoch).
        #[must_use]
        with_registration_time_utc(registration_time_utc: i64);
    }

    /// Its URI, built from its [`UriSpec`]; `None` without one.
    pub fn uri(&self) -> Option<String> {
        self.uri_spec.as_ref().map(|spec| spec.build(self))
    }

    /// Checks that the instance can be written: its name and id are node names and its
    /// payload is one a Curator reader takes.
    pub(crate) fn validate(&self) -> Result<(), DiscoveryError> {
        let invalid = |field, reason| DiscoveryError::InvalidInstance { field, reason };
        path::validate_name(&self.name).map_err(|reason| invalid("name", reason))?;
        path::validate_name(&self.id).map_err(|reason| invalid("id", reason))?;
        self.payload.validate().map_err(|reason| invalid("payload", reason))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_specs_parse_as_curator_parses_them() {
        let spec = UriSpec::parse("{scheme}://{ address }:{port}/x").unwrap();
        let variables: Vec<_> = spec.parts().iter().map(|p| (p.value.as_str(), p.variable)).collect();
        assert_eq!(
            variables,
            [("scheme", true), ("://", false), ("address", true), (":", false), ("port", true), ("/x", false)]
        );
        for bad in ["{a", "a}", "{a{b}}"] {
            assert!(
                matches!(UriSpec::parse(bad), Err(DiscoveryError::InvalidInstance { field: "uri_spec", .. })),
                "{bad}"
            );
        }
        let instance = ServiceInstance::new("s", "i").with_address("h").with_port(1).with_ssl_port(2);
        let spec = UriSpec::parse("{scheme}://{address}:{ssl-port}{[}{unknown}{]}").unwrap();
        assert_eq!(spec.build(&instance), "https://h:2{}");
    }

    #[test]
    fn only_payloads_a_curator_reader_takes_are_valid() {
        let mut fields = Map::new();
        fields.insert("a".into(), Value::from(1));
        let ok =
            [Payload::None, Payload::text("x"), Payload::map(fields.clone()), Payload::object("a.B$C", fields.clone())];
        for payload in ok {
            assert!(ServiceInstance::new("s", "i").with_payload(payload.clone()).validate().is_ok(), "{payload:?}");
        }
        let mut typed = fields.clone();
        typed.insert("@class".into(), Value::from("x.Y"));
        let bad = [
            Payload::map(typed),
            Payload::object("", fields.clone()),
            Payload::object("a..b", fields.clone()),
            Payload::object("1a", fields),
            Payload::Other(Value::from(3)),
        ];
        for payload in bad {
            let refused = ServiceInstance::new("s", "i").with_payload(payload.clone()).validate();
            assert!(matches!(refused, Err(DiscoveryError::InvalidInstance { field: "payload", .. })), "{payload:?}");
        }
        for (name, id) in [("", "i"), ("a/b", "i"), ("s", ".."), ("s", "a\u{1}")] {
            assert!(ServiceInstance::new(name, id).validate().is_err(), "{name:?} {id:?}");
        }
    }
}

/// Templates and type names another process wrote, read without a panic (issue 39, item 12).
#[cfg(test)]
mod bad_input {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn any_template_is_a_spec_or_a_typed_error(template in "[{}a-z:/. ]{0,30}|.{0,30}") {
            match UriSpec::parse(&template) {
                Ok(spec) => {
                    let _ = spec.build(&ServiceInstance::new("s", "i"));
                }
                Err(e) => {
                    let typed = matches!(e, DiscoveryError::InvalidInstance { field: "uri_spec", .. });
                    prop_assert!(typed);
                }
            }
        }

        #[test]
        fn any_type_name_is_a_type_or_none(name in ".{0,20}") {
            if let Some(kind) = ServiceType::parse(&name) {
                prop_assert_eq!(kind.as_str(), name);
            }
        }
    }
}
