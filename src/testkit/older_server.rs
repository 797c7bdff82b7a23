//! [`OlderServer`]: a proxy mode in which chosen ZooKeeper operations are answered as an older
//! (or a ZooKeeper-compatible) server answers them, `Unimplemented`, so that a test runs a
//! client against "ZooKeeper 3.4" or "a server without persistent watches, containers or TTL"
//! while a real 3.8 server does the rest.
//!
//! Owns: the list of refused operations of each server kind, and the rewriting of one
//! connection's frames. Does not own the connection (the proxy's) or faults.
//!
//! # How
//! ZooKeeper's client protocol is length-prefixed frames; after the connect handshake (the
//! first frame each way) every request starts with `xid, opcode` and every reply with `xid,
//! zxid, err`, and replies come back in request order. A refused request is replaced by an
//! `exists("/")` with the same xid, so the server answers it in its place in the order, and that
//! answer is replaced by `Unimplemented` (-6) before it reaches the client; then the connection
//! is closed, as ZooKeeper's `UnimplementedRequestProcessor` closes it after that answer (the
//! session lives on; the client connects again). The rest passes untouched.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

/// `exists`.
const OP_EXISTS: i32 = 3;
/// `multi`: refused as a whole when one of its operations is.
const OP_MULTI: i32 = 14;
/// The server's code for an operation it does not implement.
const UNIMPLEMENTED: i32 = -6;

/// Operation codes, as the wire names them.
mod op {
    pub const CREATE: i32 = 1;
    pub const DELETE: i32 = 2;
    pub const SET_DATA: i32 = 5;
    pub const CHECK: i32 = 13;
    pub const CREATE2: i32 = 15;
    pub const CHECK_WATCHES: i32 = 17;
    pub const REMOVE_WATCHES: i32 = 18;
    pub const CREATE_CONTAINER: i32 = 19;
    pub const CREATE_TTL: i32 = 21;
    pub const GET_EPHEMERALS: i32 = 103;
    pub const GET_ALL_CHILDREN_NUMBER: i32 = 104;
    pub const ADD_WATCH: i32 = 106;
    pub const WHO_AM_I: i32 = 107;
}

/// Which operations a proxy answers `Unimplemented`, as an older or a ZooKeeper-compatible
/// server does (see [`FaultProxy::start_as`](super::FaultProxy::start_as)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OlderServer {
    name: &'static str,
    refused: Vec<i32>,
}

impl OlderServer {
    /// ZooKeeper 3.4: no `create2`, no container or TTL nodes, no persistent watches (nor
    /// removing or checking watches), none of 3.6's and 3.7's reads. A client must be told the
    /// server's version (`SessionConfig::with_server_version(3, 4, _)`) to create nodes at all.
    pub fn zookeeper_3_4() -> OlderServer {
        OlderServer {
            name: "ZooKeeper 3.4",
            refused: vec![
                op::CREATE2,
                op::CHECK_WATCHES,
                op::REMOVE_WATCHES,
                op::CREATE_CONTAINER,
                op::CREATE_TTL,
                op::GET_EPHEMERALS,
                op::GET_ALL_CHILDREN_NUMBER,
                op::ADD_WATCH,
                op::WHO_AM_I,
            ],
        }
    }

    /// A server without persistent watches, container nodes or TTL nodes (as some
    /// ZooKeeper-compatible servers are), that has everything else.
    pub fn without_extras() -> OlderServer {
        OlderServer {
            name: "a server without persistent watches, containers or TTL",
            refused: vec![op::ADD_WATCH, op::CREATE_CONTAINER, op::CREATE_TTL],
        }
    }

    /// What this server kind is, for test names and messages.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// True when the operation code `opcode` is answered `Unimplemented`.
    pub fn refuses(&self, opcode: i32) -> bool {
        self.refused.contains(&opcode)
    }

    /// The two rewriters of one connection: client to server, server to client.
    pub(crate) fn sides(&self) -> (Side, Side) {
        let refused: Arc<[i32]> = self.refused.clone().into();
        let replaced = Arc::new(Mutex::new(HashSet::new()));
        let side = |upstream| Side {
            upstream,
            refused: refused.clone(),
            replaced: replaced.clone(),
            buffer: Vec::new(),
            handshaken: false,
            closing: false,
        };
        (side(true), side(false))
    }
}

/// One direction of one connection.
pub(crate) struct Side {
    upstream: bool,
    refused: Arc<[i32]>,
    /// The xids of requests replaced by an `exists`, whose answers become `Unimplemented`.
    replaced: Arc<Mutex<HashSet<i32>>>,
    /// Bytes of a frame not yet complete.
    buffer: Vec<u8>,
    /// The connect frame has passed.
    handshaken: bool,
    /// An `Unimplemented` answer was passed on: the connection closes after it.
    closing: bool,
}

fn int(bytes: &[u8], at: usize) -> Option<i32> {
    Some(i32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut framed = Vec::with_capacity(4 + payload.len());
    framed.extend_from_slice(&(payload.len() as i32).to_be_bytes());
    framed.extend_from_slice(payload);
    framed
}

impl Side {
    /// True once the connection must close after what was passed on.
    pub(crate) fn closing(&self) -> bool {
        self.closing
    }

    /// The bytes to pass on for `bytes` read: whole frames, rewritten where refused.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.buffer.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(len) = int(&self.buffer, 0) {
            if self.closing {
                break; // nothing after the refusal reaches the client
            }
            let Ok(len) = usize::try_from(len) else {
                // Not a frame this code understands: pass everything on as it is.
                out.append(&mut self.buffer);
                break;
            };
            if self.buffer.len() < 4 + len {
                break;
            }
            let whole: Vec<u8> = self.buffer.drain(..4 + len).collect();
            if !self.handshaken {
                self.handshaken = true;
                out.extend_from_slice(&whole);
                continue;
            }
            let rewritten = if self.upstream { self.request(&whole) } else { self.reply(&whole) };
            if rewritten.is_some() && !self.upstream {
                self.closing = true;
            }
            out.extend_from_slice(&rewritten.unwrap_or(whole));
        }
        out
    }

    fn request(&self, whole: &[u8]) -> Option<Vec<u8>> {
        let (xid, opcode) = (int(whole, 4)?, int(whole, 8)?);
        let refused = match opcode {
            OP_MULTI => multi_ops(whole.get(12..)?).is_some_and(|ops| ops.iter().any(|op| self.refused.contains(op))),
            _ => self.refused.contains(&opcode),
        };
        if xid <= 0 || !refused {
            return None;
        }
        self.replaced.lock().ok()?.insert(xid);
        let mut exists = Vec::new();
        exists.extend_from_slice(&xid.to_be_bytes());
        exists.extend_from_slice(&OP_EXISTS.to_be_bytes());
        exists.extend_from_slice(&1i32.to_be_bytes());
        exists.push(b'/');
        exists.push(0); // no watch
        Some(frame(&exists))
    }

    fn reply(&self, whole: &[u8]) -> Option<Vec<u8>> {
        let xid = int(whole, 4)?;
        let zxid = whole.get(8..16)?;
        if !self.replaced.lock().ok()?.remove(&xid) {
            return None;
        }
        let mut refused = Vec::new();
        refused.extend_from_slice(&xid.to_be_bytes());
        refused.extend_from_slice(zxid);
        refused.extend_from_slice(&UNIMPLEMENTED.to_be_bytes());
        Some(frame(&refused))
    }
}

/// The operation codes of a `multi` request's body (after `xid, opcode`); `None` when it holds
/// something this code cannot read (the request then passes untouched).
fn multi_ops(body: &[u8]) -> Option<Vec<i32>> {
    let mut at = 0;
    let mut ops = Vec::new();
    let string = |at: &mut usize| -> Option<()> {
        let len = int(body, *at)?;
        *at += 4 + usize::try_from(len).unwrap_or(0);
        (*at <= body.len()).then_some(())
    };
    loop {
        // A header: type, done, err.
        let (kind, done) = (int(body, at)?, *body.get(at + 4)?);
        at += 9;
        if done != 0 {
            return Some(ops);
        }
        ops.push(kind);
        string(&mut at)?; // every op starts with its path
        match kind {
            op::CREATE | op::CREATE2 | op::CREATE_CONTAINER | op::CREATE_TTL => {
                string(&mut at)?; // data
                let acls = int(body, at)?;
                at += 4;
                for _ in 0..acls.max(0) {
                    at += 4; // perms
                    string(&mut at)?; // scheme
                    string(&mut at)?; // id
                }
                at += 4; // flags
                if kind == op::CREATE_TTL {
                    at += 8;
                }
            }
            op::DELETE | op::CHECK => at += 4, // version
            op::SET_DATA => {
                string(&mut at)?;
                at += 4;
            }
            _ => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(xid: i32, opcode: i32, body: &[u8]) -> Vec<u8> {
        let mut payload = [xid.to_be_bytes(), opcode.to_be_bytes()].concat();
        payload.extend_from_slice(body);
        frame(&payload)
    }

    fn reply(xid: i32, zxid: i64, err: i32, body: &[u8]) -> Vec<u8> {
        let mut payload =
            [xid.to_be_bytes().to_vec(), zxid.to_be_bytes().to_vec(), err.to_be_bytes().to_vec()].concat();
        payload.extend_from_slice(body);
        frame(&payload)
    }

    #[test]
    fn a_refused_request_is_answered_unimplemented_in_its_place_and_the_rest_passes() {
        let (mut up, mut down) = OlderServer::without_extras().sides();
        let connect = frame(b"connect request");
        assert_eq!(up.feed(&connect), connect, "the handshake passes");
        assert_eq!(down.feed(&frame(b"connect reply")), frame(b"connect reply"));
        let get = request(1, 4, b"/a\0");
        let watch = request(2, op::ADD_WATCH, b"/b");
        // Split mid-frame: nothing is passed on until a frame is whole.
        let both = [get.clone(), watch].concat();
        let mut out = up.feed(&both[..7]);
        out.extend(up.feed(&both[7..]));
        let exists =
            frame(&[2i32.to_be_bytes().to_vec(), OP_EXISTS.to_be_bytes().to_vec(), vec![0, 0, 0, 1, b'/', 0]].concat());
        assert_eq!(out, [get, exists].concat());
        let first = reply(1, 10, 0, b"data");
        assert_eq!(down.feed(&first), first, "another request's answer passes");
        let ping = request(-2, 11, b"");
        assert_eq!(up.feed(&ping), ping);
        assert!(!down.closing());
        assert_eq!(down.feed(&reply(2, 11, 0, b"stat")), reply(2, 11, UNIMPLEMENTED, b""));
        assert!(down.closing(), "the connection closes after the refusal");
        assert_eq!(down.feed(&reply(-2, 12, 0, b"")), Vec::<u8>::new(), "nothing after it");
    }

    /// A `multi` header, then its op's record.
    fn multi_op(kind: i32, record: &[u8]) -> Vec<u8> {
        [kind.to_be_bytes().as_slice(), &[0], &(-1i32).to_be_bytes(), record].concat()
    }

    fn string(s: &[u8]) -> Vec<u8> {
        [(s.len() as i32).to_be_bytes().as_slice(), s].concat()
    }

    #[test]
    fn a_multi_is_refused_as_a_whole_when_one_of_its_operations_is() {
        let create = |kind| {
            let acl = [1i32.to_be_bytes().to_vec(), 31i32.to_be_bytes().to_vec(), string(b"world"), string(b"anyone")]
                .concat();
            multi_op(kind, &[string(b"/a"), string(b"data"), acl, 0i32.to_be_bytes().to_vec()].concat())
        };
        let end = [(-1i32).to_be_bytes().as_slice(), &[1], &(-1i32).to_be_bytes()].concat();
        let check = multi_op(op::CHECK, &[string(b"/c"), 3i32.to_be_bytes().to_vec()].concat());
        let set = multi_op(op::SET_DATA, &[string(b"/s"), string(b"x"), (-1i32).to_be_bytes().to_vec()].concat());
        let plain = [check.clone(), create(op::CREATE), set.clone(), end.clone()].concat();
        assert_eq!(multi_ops(&plain), Some(vec![op::CHECK, op::CREATE, op::SET_DATA]));
        let container = [check, create(op::CREATE_CONTAINER), set, end].concat();
        assert_eq!(multi_ops(&container), Some(vec![op::CHECK, op::CREATE_CONTAINER, op::SET_DATA]));

        let (mut up, _) = OlderServer::without_extras().sides();
        up.feed(&frame(b"connect request"));
        let passes = request(5, OP_MULTI, &plain);
        assert_eq!(up.feed(&passes), passes, "a multi of plain operations passes");
        let refused = up.feed(&request(6, OP_MULTI, &container));
        assert_eq!(int(&refused, 8), Some(OP_EXISTS), "a multi with a container create is refused");
        assert_eq!(multi_ops(&[0, 0]), None, "what cannot be read passes untouched");
    }

    #[test]
    fn each_kind_refuses_its_operations() {
        assert!(OlderServer::zookeeper_3_4().refuses(op::CREATE2));
        assert!(!OlderServer::without_extras().refuses(op::CREATE2));
        assert!(OlderServer::without_extras().refuses(op::ADD_WATCH));
        assert!(!OlderServer::zookeeper_3_4().refuses(OP_EXISTS));
    }
}
