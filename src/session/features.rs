//! What the server supports: [`Feature`]s beyond ZooKeeper 3.4 (persistent watches, `create2`,
//! container and TTL nodes), known from a declared version
//! ([`SessionConfig::with_server_version`](super::SessionConfig::with_server_version)) or learned
//! from the server's answers to their first uses.
//!
//! What is learned holds for one server: a mixed ensemble (during a rolling upgrade) has
//! members with and without a feature, and a refusal by an old member must not switch the
//! feature off once the session has moved to a newer one. The client library does not say which
//! member a connection reached, so a new connection starts again from what was declared and the
//! first use asks the server it reached, with one exception: ZooKeeper closes the connection
//! after every `Unimplemented` answer, so the connection that follows a refusal is that
//! refusal's own doing, not news of another server, and what was learned stands (else every
//! use would be refused and cut the connection again).
//!
//! Owns: what is known of each feature ([`Support`]) and the rule from a version to it. Does
//! not own the fallbacks: the session's handlers decide what to do when a feature is missing
//! (see "Any ZooKeeper-compatible server" in `docs/compatibility.md`).

pub use crate::feature::Feature;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

/// Whether the server has a feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Support {
    /// Not known yet: neither declared nor used.
    Unknown,
    /// It has it (declared, or it answered a use of it).
    Yes,
    /// It does not (declared, or it answered `Unimplemented`).
    No,
}

impl Support {
    fn code(self) -> u8 {
        match self {
            Support::Unknown => 0,
            Support::Yes => 1,
            Support::No => 2,
        }
    }

    fn of(code: u8) -> Support {
        match code {
            1 => Support::Yes,
            2 => Support::No,
            _ => Support::Unknown,
        }
    }

    /// What a server of version `version` has of `feature`.
    fn of_version(feature: Feature, (major, minor, patch): (u32, u32, u32)) -> Support {
        let at_least = |m: u32, n: u32, p: u32| (major, minor, patch) >= (m, n, p);
        let yes = |has: bool| if has { Support::Yes } else { Support::No };
        match feature {
            Feature::PersistentWatches => yes(at_least(3, 6, 0)),
            Feature::Create2 => yes(at_least(3, 5, 0)),
            Feature::Containers => yes(at_least(3, 5, 1)),
            // A server config switch decides, not the version alone.
            Feature::Ttl if at_least(3, 5, 3) => Support::Unknown,
            Feature::Ttl => Support::No,
        }
    }
}

/// What is known of the server's features, as of one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerFeatures {
    /// Persistent watches (`addWatch`).
    pub persistent_watches: Support,
    /// `create2`.
    pub create2: Support,
    /// Container nodes.
    pub containers: Support,
    /// TTL nodes.
    pub ttl: Support,
}

impl ServerFeatures {
    /// What is known of `feature`.
    pub fn support(&self, feature: Feature) -> Support {
        match feature {
            Feature::PersistentWatches => self.persistent_watches,
            Feature::Create2 => self.create2,
            Feature::Containers => self.containers,
            Feature::Ttl => self.ttl,
        }
    }
}

/// The session's knowledge of its server's features, shared by the actor's requests in flight
/// and every handle.
#[derive(Clone, Debug)]
pub(crate) struct Features {
    cells: Arc<[AtomicU8; 4]>,
    /// Refusals (`Unimplemented`) heard on the current connection.
    refusals: Arc<AtomicU8>,
    /// What was declared (all unknown when nothing was): what a new connection starts from.
    declared: [Support; 4],
}

impl Features {
    /// What a server of `declared` version has, or all unknown.
    pub(crate) fn new(declared: Option<(u32, u32, u32)>) -> Features {
        let declared =
            Feature::ALL.map(|feature| declared.map_or(Support::Unknown, |v| Support::of_version(feature, v)));
        let features =
            Features { cells: Arc::new([const { AtomicU8::new(0) }; 4]), refusals: Arc::default(), declared };
        features.forget_learned();
        features
    }

    /// The session has a new connection (to the same server, or another). What was learned
    /// from the last one is forgotten, unless a refusal ended it (see the module's docs).
    pub(crate) fn connected_again(&self) {
        if self.refusals.swap(0, Ordering::SeqCst) == 0 {
            self.forget_learned();
        }
    }

    fn forget_learned(&self) {
        for feature in Feature::ALL {
            let declared = self.declared[feature.index()].code();
            let before = self.cells[feature.index()].swap(declared, Ordering::SeqCst);
            if before != declared {
                tracing::debug!(%feature, "a new connection: what was learned of the last server is forgotten");
            }
        }
    }

    /// What is known of `feature`.
    pub(crate) fn support(&self, feature: Feature) -> Support {
        Support::of(self.cells[feature.index()].load(Ordering::SeqCst))
    }

    /// True unless the server is known not to have `feature`.
    pub(crate) fn may_have(&self, feature: Feature) -> bool {
        self.support(feature) != Support::No
    }

    /// The server answered a use of `feature`: it has it (`true`) or not.
    pub(crate) fn learned(&self, feature: Feature, has: bool) {
        let support = if has { Support::Yes } else { Support::No };
        if !has {
            self.refusals.fetch_add(1, Ordering::SeqCst);
        }
        let before = self.cells[feature.index()].swap(support.code(), Ordering::SeqCst);
        if before != support.code() {
            tracing::info!(%feature, has, "learned what the server supports");
        }
    }

    /// What is known now.
    pub(crate) fn snapshot(&self) -> ServerFeatures {
        ServerFeatures {
            persistent_watches: self.support(Feature::PersistentWatches),
            create2: self.support(Feature::Create2),
            containers: self.support(Feature::Containers),
            ttl: self.support(Feature::Ttl),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_declared_version_says_what_it_has() {
        let old = Features::new(Some((3, 4, 14))).snapshot();
        assert_eq!(
            old,
            ServerFeatures {
                persistent_watches: Support::No,
                create2: Support::No,
                containers: Support::No,
                ttl: Support::No
            }
        );
        let five = Features::new(Some((3, 5, 9))).snapshot();
        assert_eq!(
            (five.create2, five.containers, five.ttl, five.persistent_watches),
            (Support::Yes, Support::Yes, Support::Unknown, Support::No)
        );
        let eight = Features::new(Some((3, 8, 4))).snapshot();
        assert_eq!(eight.persistent_watches, Support::Yes);
        assert_eq!(Features::new(None).snapshot().containers, Support::Unknown);
    }

    #[test]
    fn an_answer_teaches_what_a_declaration_did_not_say() {
        let features = Features::new(None);
        assert!(features.may_have(Feature::Ttl));
        features.learned(Feature::Ttl, false);
        assert!(!features.may_have(Feature::Ttl));
        assert_eq!(features.clone().support(Feature::Ttl), Support::No, "clones share what is known");
        features.learned(Feature::Containers, true);
        assert_eq!(features.snapshot().containers, Support::Yes);
    }

    #[test]
    fn a_new_connection_forgets_what_was_learned_unless_a_refusal_ended_the_last() {
        let features = Features::new(Some((3, 5, 9)));
        features.learned(Feature::PersistentWatches, true);
        features.learned(Feature::Ttl, false);
        features.learned(Feature::Containers, false);
        features.connected_again();
        let now = features.snapshot();
        assert_eq!(now.ttl, Support::No, "the connection after a refusal is the refusal's doing: it stands");
        features.clone().connected_again();
        let now = features.snapshot();
        assert_eq!(
            (now.persistent_watches, now.ttl, now.containers, now.create2),
            (Support::No, Support::Unknown, Support::Yes, Support::Yes),
            "back to the declared 3.5.9"
        );
        let undeclared = Features::new(None);
        undeclared.learned(Feature::PersistentWatches, false);
        undeclared.connected_again();
        assert!(!undeclared.may_have(Feature::PersistentWatches));
        undeclared.connected_again();
        assert!(undeclared.may_have(Feature::PersistentWatches), "asked again on the next server");
    }
}
