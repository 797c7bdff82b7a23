//! The ensemble's configuration as its servers publish it in `/zookeeper/config`, and the rule
//! for when a session moves to the servers it names.
//!
//! Owns: reading the configuration's text into client addresses (pure), and [`Tracked`], what a
//! session knows of the configuration and whether its client must move. Does not own the watch
//! on the configuration nor the move itself (`actor/reconfig.rs`), nor the client's thread
//! (`client.rs`).

/// The servers of one configuration: each client address, `host:port`, in the configuration's
/// order; `version` is the node's `mzxid`, which grows with every reconfiguration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Ensemble {
    pub(crate) version: i64,
    pub(crate) hosts: Vec<String>,
}

impl Ensemble {
    /// Reads `/zookeeper/config`'s data: one `server.<id>=<quorum host>:<port>:<port>[:<role>]
    /// [;[<client address>:]<client port>]` line per server, and a `version=` line. `None` when
    /// it names no server with a client port (a standalone server publishes nothing; a server
    /// without a client port serves no client).
    pub(crate) fn parse(data: &[u8], version: i64) -> Option<Ensemble> {
        let text = std::str::from_utf8(data).ok()?;
        let hosts: Vec<String> = text.lines().filter_map(client_address).collect();
        (!hosts.is_empty()).then_some(Ensemble { version, hosts })
    }

    /// The connect string of these servers.
    pub(crate) fn connect_string(&self) -> String {
        self.hosts.join(",")
    }
}

/// The client address of one `server.` line.
fn client_address(line: &str) -> Option<String> {
    let (key, value) = line.trim().split_once('=')?;
    if !key.trim().starts_with("server.") {
        return None;
    }
    let (quorum, client) = value.trim().split_once(';')?;
    let quorum_host = host_of(quorum.trim())?;
    let client = client.trim();
    let (host, port) = match client.rsplit_once(':') {
        Some((host, port)) => (host.trim(), port.trim()),
        None => ("", client),
    };
    let port: u16 = port.parse().ok()?;
    // A server listening on every address is reached at its quorum address (Curator does so).
    let host = match host.trim_start_matches('[').trim_end_matches(']') {
        "" | "0.0.0.0" | "::" | "0:0:0:0:0:0:0:0" => quorum_host,
        bare => connectable(bare)?,
    };
    Some(format!("{host}:{port}"))
}

/// `host` as a connect string can hold it (an IPv6 address in brackets), `None` when it is no
/// host name or address: a ',' would split the connect string and a '/' would start its chroot,
/// so a server line written by something else must not smuggle either in.
fn connectable(host: &str) -> Option<String> {
    let name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_');
    if host.contains(':') {
        let address_char = |c: char| c.is_ascii_hexdigit() || matches!(c, ':' | '.' | '%');
        return host.chars().all(address_char).then(|| format!("[{host}]"));
    }
    (!host.is_empty() && host.chars().all(name_char)).then(|| host.to_owned())
}

/// The host of `<host>:<port>:<port>[:<role>]` (an IPv6 host is in brackets).
fn host_of(quorum: &str) -> Option<String> {
    if let Some(rest) = quorum.strip_prefix('[') {
        let (host, _) = rest.split_once(']')?;
        return connectable(host);
    }
    connectable(quorum.split(':').next()?.trim())
}

/// The hosts of a connect string (without a chroot), as a set to compare.
fn host_set(connect: &str) -> std::collections::BTreeSet<&str> {
    connect.split(',').map(str::trim).filter(|h| !h.is_empty()).collect()
}

/// What a session knows of the ensemble's configuration.
#[derive(Debug, Default)]
pub(crate) struct Tracked {
    /// The first configuration read: the one the connect string was written for.
    baseline: Option<i64>,
    /// The newest configuration read after the baseline, if any.
    newer: Option<Ensemble>,
}

impl Tracked {
    /// A reading of the configuration. Returns true when it is newer than anything known and
    /// differs from the baseline: the session follows it from now on.
    pub(crate) fn read(&mut self, ensemble: Ensemble) -> bool {
        let Some(baseline) = self.baseline else {
            self.baseline = Some(ensemble.version);
            return false;
        };
        let known = self.newer.as_ref().map_or(baseline, |newer| newer.version);
        if ensemble.version <= known {
            return false;
        }
        self.newer = Some(ensemble);
        true
    }

    /// The connect string a new client uses: the newest configuration's, once one was read
    /// after the baseline; `configured` until then.
    pub(crate) fn connect_string(&self, configured: &str) -> String {
        self.newer.as_ref().map_or_else(|| configured.to_owned(), Ensemble::connect_string)
    }

    /// Whether a client built for `live` (a connect string) must move: a configuration newer
    /// than the baseline names other servers.
    pub(crate) fn must_move(&self, live: &str) -> bool {
        self.newer.as_ref().is_some_and(|newer| host_set(&newer.connect_string()) != host_set(live))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const CONFIG: &str = "server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\n\
                          server.2=10.0.0.2:2888:3888;2182\n\
                          server.3=[::1]:2888:3888:observer;0.0.0.0:2183\n\
                          server.4=10.0.0.4:2888:3888:participant\n\
                          version=100000003\n";

    #[test]
    fn a_configuration_gives_every_servers_client_address() {
        let ensemble = Ensemble::parse(CONFIG.as_bytes(), 7).expect("servers");
        assert_eq!(ensemble.hosts, ["127.0.0.1:2181", "10.0.0.2:2182", "[::1]:2183"]);
        assert_eq!(ensemble.connect_string(), "127.0.0.1:2181,10.0.0.2:2182,[::1]:2183");
        assert_eq!(ensemble.version, 7);
    }

    #[test]
    fn a_configuration_without_client_ports_names_nothing() {
        assert_eq!(Ensemble::parse(b"", 1), None, "a standalone server's");
        assert_eq!(Ensemble::parse(b"server.1=h:1:2\nversion=1\n", 1), None);
        assert_eq!(Ensemble::parse(b"server.1=h:1:2;notaport\n", 1), None);
        assert_eq!(Ensemble::parse(&[0xff, 0xfe], 1), None);
    }

    fn ensemble(version: i64, hosts: &[&str]) -> Ensemble {
        Ensemble { version, hosts: hosts.iter().map(|h| h.to_string()).collect() }
    }

    #[test]
    fn the_first_reading_is_the_baseline_and_moves_nothing() {
        let mut tracked = Tracked::default();
        assert!(!tracked.read(ensemble(5, &["a:1", "b:1"])));
        assert_eq!(tracked.connect_string("proxy:9"), "proxy:9", "the configured string is kept");
        assert!(!tracked.must_move("proxy:9"), "a proxied session stays on its proxy");
        assert!(!tracked.read(ensemble(5, &["a:1", "b:1"])), "the same version again");
    }

    #[test]
    fn a_newer_configuration_is_followed_and_an_older_one_ignored() {
        let mut tracked = Tracked::default();
        tracked.read(ensemble(5, &["a:1", "b:1"]));
        assert!(tracked.read(ensemble(9, &["b:1", "c:1"])));
        assert_eq!(tracked.connect_string("a:1,b:1"), "b:1,c:1");
        assert!(tracked.must_move("a:1,b:1"));
        assert!(!tracked.must_move("c:1, b:1"), "the same servers in another order");
        assert!(!tracked.read(ensemble(7, &["z:1"])), "a reading older than the newest");
        assert_eq!(tracked.connect_string("a:1,b:1"), "b:1,c:1");
    }
}

/// Configurations read from `/zookeeper/config`, read without a panic (issue 39, item 12).
#[cfg(test)]
mod bad_input {
    use proptest::prelude::*;

    use super::*;

    /// Any line, or a `server.` line with any parts.
    fn line() -> impl Strategy<Value = String> {
        prop_oneof![
            ".{0,40}",
            ("[0-9]{1,2}", "[a-z0-9.:\\[\\]]{0,16}", "[a-z0-9.:\\[\\], /;=]{0,12}", "[0-9]{0,6}")
                .prop_map(|(id, quorum, host, port)| format!("server.{id}={quorum};{host}:{port}")),
        ]
    }

    proptest! {
        #[test]
        fn any_configuration_gives_hosts_a_connect_string_can_hold(lines in prop::collection::vec(line(), 0..6)) {
            let Some(ensemble) = Ensemble::parse(lines.join("\n").as_bytes(), 1) else { return Ok(()) };
            for host in &ensemble.hosts {
                let (name, port) = host.rsplit_once(':').expect("host:port");
                prop_assert!(port.parse::<u16>().is_ok(), "{}", host);
                prop_assert!(!name.is_empty(), "{}", host);
                // A comma would split the connect string, a '/' would start its chroot.
                prop_assert!(!host.contains([',', '/', ' ', ';', '=']), "{}", host);
            }
        }
    }
}
