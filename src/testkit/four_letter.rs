//! Four-letter-word commands, over plain blocking sockets so they work outside any runtime and
//! while the ZooKeeper client under test is misbehaving.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::TestkitError;

const TIMEOUT: Duration = Duration::from_secs(5);

/// Sends `word` (e.g. `"srvr"`) to the server at `addr` (`host:port`) and returns everything it
/// answers until it closes the connection. Times out after 5 s per step.
pub fn four_letter_word(addr: &str, word: &str) -> Result<String, TestkitError> {
    let what = |step: &str| format!("4lw `{word}` to {addr}: {step}");
    let socket_addr =
        addr.to_socket_addrs().map_err(|e| TestkitError::io(what("resolve"), e))?.next().ok_or_else(|| {
            TestkitError::io(what("resolve"), std::io::Error::new(std::io::ErrorKind::NotFound, "no address"))
        })?;
    let mut stream =
        TcpStream::connect_timeout(&socket_addr, TIMEOUT).map_err(|e| TestkitError::io(what("connect"), e))?;
    stream
        .set_read_timeout(Some(TIMEOUT))
        .and_then(|()| stream.set_write_timeout(Some(TIMEOUT)))
        .map_err(|e| TestkitError::io(what("set timeouts"), e))?;
    stream.write_all(word.as_bytes()).map_err(|e| TestkitError::io(what("send"), e))?;
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).map_err(|e| TestkitError::io(what("read"), e))?;
    Ok(String::from_utf8_lossy(&answer).into_owned())
}

/// Whether the server answers `ruok` with `imok`.
///
/// `imok` only means the process is up: the server answers it before its database is loaded.
/// Use [`srvr`] (a `Mode:` line) to know it is serving.
pub fn ruok(addr: &str) -> bool {
    four_letter_word(addr, "ruok").is_ok_and(|answer| answer.trim() == "imok")
}

/// `srvr`: version, latency, counts and the `Mode:` (standalone / leader / follower).
pub fn srvr(addr: &str) -> Result<String, TestkitError> {
    four_letter_word(addr, "srvr")
}

/// `mntr`: monitoring key/value pairs.
pub fn mntr(addr: &str) -> Result<String, TestkitError> {
    four_letter_word(addr, "mntr")
}

/// `cons`: one line per client connection, including its `sid=0x...`.
pub fn cons(addr: &str) -> Result<String, TestkitError> {
    four_letter_word(addr, "cons")
}

/// `wchc`: watches by session.
pub fn wchc(addr: &str) -> Result<String, TestkitError> {
    four_letter_word(addr, "wchc")
}

/// `wchp`: watches by path.
pub fn wchp(addr: &str) -> Result<String, TestkitError> {
    four_letter_word(addr, "wchp")
}

/// Session ids (as `i64`, like `zookeeper_client::SessionId`) of the connections that `cons` on
/// `addr` lists. Connections still in their handshake have no session yet and are skipped.
pub fn sessions_on(addr: &str) -> Result<Vec<i64>, TestkitError> {
    Ok(parse_session_ids(&cons(addr)?))
}

pub(crate) fn parse_session_ids(cons: &str) -> Vec<i64> {
    let mut ids = Vec::new();
    let mut rest = cons;
    while let Some(pos) = rest.find("sid=0x") {
        rest = &rest[pos + "sid=0x".len()..];
        let end = rest.find(|c: char| !c.is_ascii_hexdigit()).unwrap_or(rest.len());
        // Parsed as u64 because ids of servers with a high myid use the sign bit; the cast keeps
        // the bits, matching the client's i64 representation.
        if let Ok(id) = u64::from_str_radix(&rest[..end], 16) {
            let id = id as i64;
            if id != 0 && !ids.contains(&id) {
                ids.push(id);
            }
        }
        rest = &rest[end..];
    }
    ids
}

/// Whether `srvr` output says the server is serving (standalone, leader, follower or observer).
pub(crate) fn has_mode(srvr: &str) -> bool {
    srvr.lines().any(|line| line.starts_with("Mode:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cons_session_ids() {
        let cons = " /127.0.0.1:5000[1](queued=0,recved=1,sent=1,sid=0x100001f2a3b0000,lop=PING)\n \
                    /127.0.0.1:5001[0](queued=0,recved=1,sent=0)\n \
                    /127.0.0.1:5002[1](queued=0,recved=1,sent=1,sid=0xff00000000000001,lop=PING)\n";
        assert_eq!(parse_session_ids(cons), vec![0x100001f2a3b0000, 0xff00000000000001u64 as i64]);
    }

    #[test]
    fn detects_mode() {
        assert!(has_mode("Zookeeper version: 3.8\nMode: follower\nNode count: 5\n"));
        assert!(!has_mode("This ZooKeeper instance is not currently serving requests\n"));
    }
}
