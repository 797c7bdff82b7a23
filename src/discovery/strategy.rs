//! How a provider picks one instance among those it may use: Curator's `ProviderStrategy`s.
//!
//! Owns: the strategies and their state, as a pure step (`Picker::pick`) over the instances of
//! the moment. Does not own which instances are candidates (enabled, not down: `provider.rs`).

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use super::instance::ServiceInstance;

/// How a provider picks an instance.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ProviderStrategy {
    /// Each in turn (Curator's `RoundRobinStrategy`, its default).
    #[default]
    RoundRobin,
    /// Any, at random (Curator's `RandomStrategy`).
    Random,
    /// The same instance as last time while it is a candidate (equal in every field, as
    /// Curator's); else one picked by the inner strategy (Curator's `StickyStrategy`).
    Sticky(Box<ProviderStrategy>),
}

/// A strategy with its state.
#[derive(Debug)]
pub(crate) struct Picker {
    strategy: ProviderStrategy,
    next: usize,
    random: u64,
    inner: Option<Box<Picker>>,
    stuck: Option<ServiceInstance>,
}

impl Picker {
    pub(crate) fn new(strategy: ProviderStrategy) -> Picker {
        let inner = match &strategy {
            ProviderStrategy::Sticky(inner) => Some(Box::new(Picker::new((**inner).clone()))),
            _ => None,
        };
        // A random start per picker, so that two providers do not walk in step.
        let random = RandomState::new().hash_one(0u8) | 1;
        Picker { strategy, next: 0, random, inner, stuck: None }
    }

    /// One instance of `candidates`, `None` when there are none.
    pub(crate) fn pick(&mut self, candidates: &[ServiceInstance]) -> Option<ServiceInstance> {
        if candidates.is_empty() {
            return None;
        }
        match &self.strategy {
            ProviderStrategy::RoundRobin => {
                let picked = candidates[self.next % candidates.len()].clone();
                self.next = self.next.wrapping_add(1);
                Some(picked)
            }
            ProviderStrategy::Random => {
                // xorshift64: no dependency for a choice that needs no quality.
                self.random ^= self.random << 13;
                self.random ^= self.random >> 7;
                self.random ^= self.random << 17;
                Some(candidates[(self.random % candidates.len() as u64) as usize].clone())
            }
            ProviderStrategy::Sticky(_) => {
                if let Some(stuck) = self.stuck.as_ref().filter(|stuck| candidates.contains(stuck)) {
                    return Some(stuck.clone());
                }
                let picked = self.inner.as_mut()?.pick(candidates)?;
                self.stuck = Some(picked.clone());
                Some(picked)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instances(ids: &[&str]) -> Vec<ServiceInstance> {
        ids.iter().map(|id| ServiceInstance::new("s", *id)).collect()
    }

    fn ids(picker: &mut Picker, candidates: &[ServiceInstance], n: usize) -> Vec<String> {
        (0..n).map(|_| picker.pick(candidates).map(|i| i.id).unwrap_or_default()).collect()
    }

    #[test]
    fn round_robin_takes_each_in_turn_and_none_of_nothing() {
        let mut picker = Picker::new(ProviderStrategy::RoundRobin);
        assert_eq!(picker.pick(&[]), None);
        assert_eq!(ids(&mut picker, &instances(&["a", "b", "c"]), 4), ["a", "b", "c", "a"]);
        assert_eq!(ids(&mut picker, &instances(&["a", "b"]), 3), ["a", "b", "a"]);
    }

    #[test]
    fn random_reaches_every_instance() {
        let mut picker = Picker::new(ProviderStrategy::Random);
        let picked = ids(&mut picker, &instances(&["a", "b", "c"]), 300);
        for id in ["a", "b", "c"] {
            assert!(picked.iter().filter(|p| *p == id).count() > 30, "{id}: {picked:?}");
        }
    }

    #[test]
    fn sticky_keeps_its_instance_while_it_is_a_candidate() {
        let mut picker = Picker::new(ProviderStrategy::Sticky(Box::new(ProviderStrategy::RoundRobin)));
        assert_eq!(ids(&mut picker, &instances(&["a", "b"]), 3), ["a", "a", "a"]);
        // "a" went: the inner round robin's next turn picks again, and that one sticks.
        assert_eq!(ids(&mut picker, &instances(&["b", "c"]), 2), ["c", "c"]);
        assert_eq!(ids(&mut picker, &instances(&["c", "a", "b"]), 2), ["c", "c"]);
    }
}
