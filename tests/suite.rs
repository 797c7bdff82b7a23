//! The integration tests, one module per file beside this one, in one test binary: one link
//! instead of thirty, and libtest runs tests of every file side by side (the thread count is in
//! `.cargo/config.toml`) instead of one file after another. Every test talks to a real ZooKeeper
//! started by the testkit. Run one file's tests with `cargo test --all-features --test suite
//! lock::`.
//!
//! `metrics.rs` is a binary of its own: it installs the process's global metrics recorder, which
//! the other tests' sessions would write into.

mod common;

mod acl;
mod atomic;
mod bad_input;
mod barrier;
mod cache;
mod cancellation;
mod close;
mod compatibility;
mod counter;
mod curator_peer;
mod damper;
mod discovery;
mod discovery_curator;
mod docs_failure_tables;
mod election;
mod election_curator;
mod errors;
mod events;
mod faults;
mod group;
mod handles;
mod health;
mod history_checkers;
mod holding;
mod inspect;
mod lock;
mod lock_curator;
mod multi_lock;
mod persistent_node;
mod proclaim;
mod queue;
mod queue_delayed;
mod recipe_handles;
mod reconfig;
mod requests;
mod retry;
mod safe_until;
mod sasl;
mod scenarios_cache;
mod scenarios_election;
mod scenarios_lock;
mod scenarios_queue;
mod scenarios_tasks;
mod shared_value;
mod tasks;
mod testkit;
mod testkit_proxy;
mod testkit_role;
mod tls;
mod watches;
