//! [`LiveCell`]: which session is live, readable without asking the session actor.
//!
//! Owns: the live session's id and generation as the actor last set them, for handles that must
//! decide at once (a pinned create, "has this session ended?"). Does not own deciding when a
//! session is live: the session actor sets and clears it.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use super::events::SessionId;

/// The live session as the actor keeps it for its handles: its id (0 while none) and its
/// generation (0 while none). Set generation first and cleared id first, so that a reader that
/// sees an id never sees the generation of an older session for long.
#[derive(Debug, Default)]
pub(crate) struct LiveCell {
    id: AtomicI64,
    generation: AtomicU64,
}

impl LiveCell {
    /// Session `id` of `generation` is live.
    pub(crate) fn set(&self, id: SessionId, generation: u64) {
        self.generation.store(generation, Ordering::SeqCst);
        self.id.store(id.0, Ordering::SeqCst);
    }

    /// No session is live.
    pub(crate) fn clear(&self) {
        self.id.store(0, Ordering::SeqCst);
        self.generation.store(0, Ordering::SeqCst);
    }

    /// The live session's id; 0 while none is live.
    pub(crate) fn id(&self) -> i64 {
        self.id.load(Ordering::SeqCst)
    }

    /// The live session's generation, if one is live.
    pub(crate) fn generation(&self) -> Option<u64> {
        let generation = self.generation.load(Ordering::SeqCst);
        (generation != 0 && self.id() != 0).then_some(generation)
    }
}
