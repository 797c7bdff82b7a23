//! A leader's published value: [`Proclamation`], how it is stored, the fenced write that
//! publishes it ([`proclaim`]), and the pure rule by which an observer turns what it reads into
//! changes, in order.
//!
//! Owns: the stored format, the fenced write, and [`Observed`] (which reading is news, which is
//! stale, which must be read again). Does not own reading or watching (the observer actor,
//! `observer.rs`) or who leads (the contender and the holder core).
//!
//! # Storage
//! The value lives in the election node's own data (the parent of the participants' nodes),
//! which Curator's `LeaderLatch` never reads: its participants still see a valid latch. The data
//! is `ZKP1`, the term's fencing token (the leader node's czxid, 8 bytes big-endian), then the
//! value's bytes. A value is the current leader's only when its token is that leader's term, so
//! a new leader starts without one, and a deposed leader's value is never shown as the next
//! one's. The write is `multi(check(leader node), setData(election node))`: a leader whose node
//! is gone (it was deposed) writes nothing.

use std::future::Future;

use super::error::ElectionError;
use super::messages::{LeaderTerm, Proclamation};
use crate::recipe::{FenceError, FencingToken};
use crate::session::SessionHandle;
use crate::session::requests::Op;

/// What the stored value starts with.
const MAGIC: &[u8; 4] = b"ZKP1";

/// The election node's data for `value` proclaimed in `term`.
pub(crate) fn encode(term: FencingToken, value: &[u8]) -> Vec<u8> {
    let mut data = Vec::with_capacity(MAGIC.len() + 8 + value.len());
    data.extend_from_slice(MAGIC);
    data.extend_from_slice(&term.0.to_be_bytes());
    data.extend_from_slice(value);
    data
}

/// The term and value in the election node's data; `None` when it holds no proclamation (empty,
/// or written by something else).
pub(crate) fn decode(data: &[u8]) -> Option<(FencingToken, &[u8])> {
    let rest = data.strip_prefix(MAGIC)?;
    let (term, value) = rest.split_first_chunk::<8>()?;
    Some((FencingToken(i64::from_be_bytes(*term)), value))
}

/// Publishes `value` as the leader of `term`'s election: written only while `term`'s node
/// stands, so a deposed leader gets [`ElectionError::NotLeader`] and writes nothing.
/// [`ElectionError::OutcomeUnknown`] when the connection dropped with the write in flight (it
/// may have applied: observers tell).
///
/// For a leader actor (leader-actor mode), which has its term but no handle;
/// [`ElectionHandle::proclaim`](super::ElectionHandle::proclaim) does the same for the
/// participant's current term.
///
/// # Cancel safety
/// Sent when this is called: dropping the future does not withdraw the write.
pub fn proclaim(
    session: &SessionHandle,
    term: &LeaderTerm,
    value: Vec<u8>,
) -> impl Future<Output = Result<(), ElectionError>> + 'static + use<> {
    let election = crate::path::parent(&term.node).unwrap_or("/").to_owned();
    let write = Op::SetData { path: election.clone(), data: encode(term.token, &value), version: None };
    let sent = term.guarded_write(session, vec![write]);
    async move {
        match sent.await {
            Ok(_) => Ok(()),
            Err(FenceError::Ended { .. }) => Err(ElectionError::NotLeader { path: election }),
            Err(FenceError::OutcomeUnknown { source, .. }) => {
                Err(ElectionError::OutcomeUnknown { path: election, source })
            }
            Err(FenceError::ZooKeeper(error)) => Err(ElectionError::ZooKeeper(error)),
        }
    }
}

/// What one read of an election found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Reading {
    /// Nobody is in line (or the election node does not exist).
    Vacant,
    /// `leader_id` leads in `term`; the election node's data was `stored`.
    Led {
        /// The leader's id.
        leader_id: String,
        /// Its node's czxid.
        term: FencingToken,
        /// The election node's data, read before the leader's node.
        stored: Vec<u8>,
    },
}

/// What an observer does with a reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Step {
    /// Tell subscribers: this is the election now.
    Tell(Option<Proclamation>),
    /// Nothing new (or an older view than one told already).
    Quiet,
    /// The reading mixes two moments (the value is a later term's than the leader read): read
    /// again.
    ReadAgain,
}

/// What an observer has told: the rule that keeps its changes in order.
#[derive(Debug, Default)]
pub(crate) struct Observed {
    /// `None` before the first reading; then what was told last.
    told: Option<Option<Proclamation>>,
    /// The highest term told so far: an older one is a stale view, never news.
    highest: Option<FencingToken>,
}

impl Observed {
    /// What was told last (`None` before the first reading).
    pub(crate) fn current(&self) -> Option<&Option<Proclamation>> {
        self.told.as_ref()
    }

    /// The next reading.
    pub(crate) fn step(&mut self, reading: Reading) -> Step {
        let now = match reading {
            Reading::Vacant => None,
            Reading::Led { leader_id, term, stored } => {
                if self.highest.is_some_and(|highest| term < highest) {
                    return Step::Quiet;
                }
                let value = match decode(&stored) {
                    Some((written, _)) if written > term => return Step::ReadAgain,
                    Some((written, value)) if written == term => Some(value.to_vec()),
                    _ => None,
                };
                self.highest = Some(term);
                Some(Proclamation { leader_id, term, value })
            }
        };
        if self.told.as_ref() == Some(&now) {
            return Step::Quiet;
        }
        self.told = Some(now.clone());
        Step::Tell(now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn led(id: &str, term: i64, stored: Vec<u8>) -> Reading {
        Reading::Led { leader_id: id.into(), term: FencingToken(term), stored }
    }

    fn told(id: &str, term: i64, value: Option<&str>) -> Step {
        Step::Tell(Some(Proclamation {
            leader_id: id.into(),
            term: FencingToken(term),
            value: value.map(|v| v.as_bytes().to_vec()),
        }))
    }

    #[test]
    fn the_stored_form_round_trips_and_foreign_data_is_no_proclamation() {
        let data = encode(FencingToken(0x1_0000_0005), b"hello");
        assert_eq!(decode(&data), Some((FencingToken(0x1_0000_0005), &b"hello"[..])));
        assert_eq!(decode(&encode(FencingToken(3), b"")), Some((FencingToken(3), &b""[..])));
        assert_eq!(decode(b""), None);
        assert_eq!(decode(b"ZKP1\0\0"), None, "too short for a term");
        assert_eq!(decode(b"{\"leader\":1}"), None);
    }

    #[test]
    fn a_value_belongs_to_the_term_that_wrote_it() {
        let mut seen = Observed::default();
        assert_eq!(seen.step(led("a", 10, Vec::new())), told("a", 10, None), "the first reading is told");
        assert_eq!(seen.step(led("a", 10, encode(FencingToken(10), b"v1"))), told("a", 10, Some("v1")));
        assert_eq!(seen.step(led("a", 10, encode(FencingToken(10), b"v1"))), Step::Quiet, "no change");
        // The next leader starts without a value: the old term's is not its.
        assert_eq!(seen.step(led("b", 12, encode(FencingToken(10), b"v1"))), told("b", 12, None));
        assert_eq!(seen.step(led("b", 12, encode(FencingToken(12), b"w"))), told("b", 12, Some("w")));
        assert_eq!(seen.step(Reading::Vacant), Step::Tell(None));
        assert_eq!(seen.step(Reading::Vacant), Step::Quiet);
    }

    #[test]
    fn an_older_view_is_never_news_and_a_mixed_one_is_read_again() {
        let mut seen = Observed::default();
        assert_eq!(seen.step(led("b", 12, encode(FencingToken(12), b"w"))), told("b", 12, Some("w")));
        assert_eq!(seen.step(led("a", 10, encode(FencingToken(10), b"v"))), Step::Quiet, "a stale view");
        // The value is a later term's than the leader read: the leader moved on meanwhile.
        assert_eq!(seen.step(led("b", 12, encode(FencingToken(14), b"x"))), Step::ReadAgain);
        assert_eq!(
            seen.current(),
            Some(&Some(Proclamation { leader_id: "b".into(), term: FencingToken(12), value: Some(b"w".to_vec()) }))
        );
    }
}

/// Election node data another process wrote, read without a panic (issue 39, item 12).
#[cfg(test)]
mod bad_input {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn any_bytes_are_a_proclamation_or_none(
            data in prop_oneof![
                prop::collection::vec(any::<u8>(), 0..40),
                prop::collection::vec(any::<u8>(), 0..20).prop_map(|tail| [MAGIC, &tail[..]].concat()),
            ],
        ) {
            if let Some((term, value)) = decode(&data) {
                prop_assert_eq!(encode(term, value), data.clone());
            } else {
                prop_assert!(!data.starts_with(MAGIC) || data.len() < MAGIC.len() + 8);
            }
        }
    }
}
