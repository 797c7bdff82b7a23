//! curator-x-discovery's JSON for a [`ServiceInstance`], both ways.
//!
//! Owns: the bytes of an instance node. Written as Curator's default serializer writes them
//! (its "compatible" mode): every field in Curator's order, absent values as explicit `null`s,
//! `serviceType` in upper case, an object payload with its Java class first (`@class`), and
//! `enabled` left out, unless it is `false` (Curator's readers take the field and skip a
//! disabled instance). Read leniently, as Jackson reads it: unknown fields ignored, missing ones
//! given Curator's defaults. Does not own validation of what may be written (`instance.rs`).

use serde_json::{Map, Value};

use super::error::DiscoveryError;
use super::instance::{DEFAULT_PAYLOAD_CLASS, Payload, ServiceInstance, ServiceType, UriPart, UriSpec};

/// Curator's JSON for `instance`; [`DiscoveryError::InvalidInstance`] for one that must not be
/// written (a Curator reader would fail on it, and with it on the whole service).
pub(crate) fn encode(instance: &ServiceInstance) -> Result<Vec<u8>, DiscoveryError> {
    instance.validate()?;
    let mut json = Map::new();
    json.insert("name".into(), instance.name.clone().into());
    json.insert("id".into(), instance.id.clone().into());
    json.insert("address".into(), instance.address.clone().into());
    json.insert("port".into(), instance.port.into());
    json.insert("sslPort".into(), instance.ssl_port.into());
    json.insert("payload".into(), payload_json(&instance.payload));
    json.insert("registrationTimeUTC".into(), instance.registration_time_utc.into());
    json.insert("serviceType".into(), instance.service_type.as_str().into());
    json.insert("uriSpec".into(), instance.uri_spec.as_ref().map_or(Value::Null, uri_spec_json));
    if !instance.enabled {
        json.insert("enabled".into(), false.into());
    }
    Ok(serde_json::to_vec(&Value::Object(json)).expect("a JSON value always serializes"))
}

fn payload_json(payload: &Payload) -> Value {
    match payload {
        Payload::None => Value::Null,
        Payload::Text(text) => text.clone().into(),
        Payload::Object { class, fields } => {
            let mut typed = Map::with_capacity(fields.len() + 1);
            typed.insert("@class".into(), class.clone().into());
            typed.extend(fields.iter().map(|(k, v)| (k.clone(), v.clone())));
            Value::Object(typed)
        }
        // Refused by `validate`; kept as it is should that ever change.
        Payload::Other(value) => value.clone(),
    }
}

fn uri_spec_json(spec: &UriSpec) -> Value {
    let parts = spec
        .parts()
        .iter()
        .map(|part| {
            let mut json = Map::new();
            json.insert("value".into(), part.value.clone().into());
            json.insert("variable".into(), part.variable.into());
            Value::Object(json)
        })
        .collect();
    let mut json = Map::new();
    json.insert("parts".into(), Value::Array(parts));
    Value::Object(json)
}

/// The instance in `bytes` (a node written by Curator or by us); `Err` says, in a few words,
/// why it cannot be read.
pub(crate) fn decode(bytes: &[u8]) -> Result<ServiceInstance, String> {
    let json: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(mut json) = json else { return Err("not a JSON object".into()) };
    let mut take = |field: &str| json.remove(field).unwrap_or(Value::Null);
    let text = |field: &str, value: Value| match value {
        Value::Null => Ok(None),
        Value::String(s) => Ok(Some(s)),
        other => Err(format!("{field} is not a string: {other}")),
    };
    let port = |field: &str, value: Value| match value {
        Value::Null => Ok(None),
        Value::Number(n) => {
            n.as_u64().and_then(|p| u16::try_from(p).ok()).map(Some).ok_or(format!("{field} {n} is not a port"))
        }
        other => Err(format!("{field} is not a number: {other}")),
    };
    let name = text("name", take("name"))?.ok_or("name is missing")?;
    let id = text("id", take("id"))?.ok_or("id is missing")?;
    let address = text("address", take("address"))?;
    let port_ = port("port", take("port"))?;
    let ssl_port = port("sslPort", take("sslPort"))?;
    let payload = match take("payload") {
        Value::Null => Payload::None,
        Value::String(s) => Payload::Text(s),
        Value::Object(mut fields) => {
            let class = match fields.shift_remove("@class") {
                None => DEFAULT_PAYLOAD_CLASS.to_owned(),
                Some(Value::String(class)) => class,
                Some(other) => return Err(format!("payload @class is not a string: {other}")),
            };
            Payload::Object { class, fields }
        }
        other => Payload::Other(other),
    };
    let registration_time_utc = match take("registrationTimeUTC") {
        Value::Null => 0,
        Value::Number(n) => n.as_i64().ok_or(format!("registrationTimeUTC {n} is not a long"))?,
        other => return Err(format!("registrationTimeUTC is not a number: {other}")),
    };
    let service_type = match text("serviceType", take("serviceType"))? {
        None => ServiceType::Dynamic,
        Some(name) => ServiceType::parse(&name).ok_or(format!("unknown serviceType {name:?}"))?,
    };
    let uri_spec = match take("uriSpec") {
        Value::Null => None,
        Value::Object(mut spec) => Some(uri_spec(spec.remove("parts").unwrap_or(Value::Null))?),
        other => return Err(format!("uriSpec is not an object: {other}")),
    };
    let enabled = match take("enabled") {
        Value::Null => true,
        Value::Bool(enabled) => enabled,
        other => return Err(format!("enabled is not a boolean: {other}")),
    };
    let mut instance = ServiceInstance::new(name, id)
        .with_payload(payload)
        .with_registration_time_utc(registration_time_utc)
        .with_service_type(service_type)
        .with_enabled(enabled);
    (instance.address, instance.port, instance.ssl_port, instance.uri_spec) = (address, port_, ssl_port, uri_spec);
    Ok(instance)
}

fn uri_spec(parts: Value) -> Result<UriSpec, String> {
    let parts = match parts {
        Value::Null => Vec::new(),
        Value::Array(parts) => parts,
        other => return Err(format!("uriSpec parts are not a list: {other}")),
    };
    let parts = parts
        .into_iter()
        .map(|part| match part {
            Value::Object(mut part) => {
                let value = match part.remove("value") {
                    Some(Value::String(value)) => value,
                    None | Some(Value::Null) => String::new(),
                    Some(other) => return Err(format!("a uriSpec part's value is not a string: {other}")),
                };
                let variable = matches!(part.remove("variable"), Some(Value::Bool(true)));
                Ok(UriPart { value, variable })
            }
            other => Err(format!("a uriSpec part is not an object: {other}")),
        })
        .collect::<Result<_, _>>()?;
    Ok(UriSpec::from_parts(parts))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Written by Curator 5.4's `JsonInstanceSerializer(Map.class)` for the same instance.
    const CURATOR: &str = r#"{"name":"billing","id":"a1","address":"10.0.0.1","port":8080,"sslPort":null,"payload":{"@class":"java.util.LinkedHashMap","zone":"eu","weight":3},"registrationTimeUTC":1700000000000,"serviceType":"DYNAMIC","uriSpec":{"parts":[{"value":"scheme","variable":true},{"value":"://","variable":false},{"value":"address","variable":true},{"value":":","variable":false},{"value":"port","variable":true}]}}"#;

    fn billing() -> ServiceInstance {
        let mut fields = Map::new();
        fields.insert("zone".into(), "eu".into());
        fields.insert("weight".into(), 3.into());
        ServiceInstance::new("billing", "a1")
            .with_address("10.0.0.1")
            .with_port(8080)
            .with_payload(Payload::map(fields))
            .with_registration_time_utc(1_700_000_000_000)
            .with_uri_spec(UriSpec::parse("{scheme}://{address}:{port}").unwrap())
    }

    #[test]
    fn written_byte_for_byte_as_curator_writes_it() {
        assert_eq!(String::from_utf8(encode(&billing()).unwrap()).unwrap(), CURATOR);
        assert_eq!(decode(CURATOR.as_bytes()).unwrap(), billing());
    }

    #[test]
    fn enabled_is_written_only_when_false_and_read_as_true_when_missing() {
        let disabled = billing().with_enabled(false);
        let bytes = encode(&disabled).unwrap();
        assert!(String::from_utf8(bytes.clone()).unwrap().ends_with(r#","enabled":false}"#));
        assert_eq!(decode(&bytes).unwrap(), disabled);
        assert!(decode(CURATOR.as_bytes()).unwrap().enabled);
    }

    #[test]
    fn what_curator_may_write_is_read_and_what_it_cannot_is_said() {
        let minimal = decode(br#"{"name":"s","id":"i","extra":1}"#).unwrap();
        assert_eq!(
            (minimal.service_type, minimal.registration_time_utc, minimal.payload),
            (ServiceType::Dynamic, 0, Payload::None)
        );
        let bare = decode(br#"{"name":"s","id":"i","payload":{"a":"b"}}"#).unwrap();
        assert!(matches!(bare.payload, Payload::Object { ref class, .. } if class == DEFAULT_PAYLOAD_CLASS));
        let wrapped = decode(br#"{"name":"s","id":"i","payload":["java.util.ArrayList",[1]]}"#).unwrap();
        assert!(matches!(wrapped.payload, Payload::Other(_)));
        for bad in [
            &b"not json"[..],
            br#"[1]"#,
            br#"{"id":"i"}"#,
            br#"{"name":"s","id":"i","port":70000}"#,
            br#"{"name":"s","id":"i","serviceType":"dynamic"}"#,
            br#"{"name":"s","id":"i","enabled":"yes"}"#,
        ] {
            assert!(decode(bad).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}

/// Instance nodes another process wrote, read without a panic (issue 39, item 12).
#[cfg(test)]
mod bad_input {
    use proptest::prelude::*;

    use super::*;

    /// Any JSON value, a few levels deep.
    fn json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            ".{0,12}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::vec((".{0,8}", inner), 0..6)
                    .prop_map(|fields| Value::Object(fields.into_iter().collect())),
            ]
        })
    }

    /// An object with Curator's field names, each holding any JSON value.
    fn instance_like() -> impl Strategy<Value = Value> {
        let field = prop_oneof![
            Just("name"),
            Just("id"),
            Just("address"),
            Just("port"),
            Just("sslPort"),
            Just("payload"),
            Just("registrationTimeUTC"),
            Just("serviceType"),
            Just("uriSpec"),
            Just("enabled"),
        ];
        prop::collection::vec((field, json()), 0..12)
            .prop_map(|fields| Value::Object(fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()))
    }

    proptest! {
        #[test]
        fn any_bytes_are_an_instance_or_a_reason(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            if let Err(reason) = decode(&bytes) {
                prop_assert!(!reason.is_empty());
            }
        }

        #[test]
        fn any_json_is_an_instance_that_encodes_again_or_a_reason(json in prop_oneof![json(), instance_like()]) {
            let bytes = serde_json::to_vec(&json).expect("JSON");
            match decode(&bytes) {
                Ok(instance) => {
                    let again = encode(&instance).expect("a decoded instance encodes");
                    prop_assert_eq!(decode(&again).expect("and decodes again"), instance);
                }
                Err(reason) => prop_assert!(!reason.is_empty()),
            }
        }
    }
}
