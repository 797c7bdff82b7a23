//! The flap damper (`SessionConfig::with_flap_damper`): a link that drops and comes back many
//! times within a window reaches the recipes as one `Suspended` ... `Reconnected` pair, with no
//! false loss; a session without it (the control) hears every drop.

use crate::common;

use std::time::Duration;

use actix_zookeeper::lock::{LockConfig, LockEvent, LockHandle};
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::{ClientLinks, TestZooKeeper, unique_root};
use common::*;

fn count(events: &[SessionEvent], pred: impl Fn(&SessionEvent) -> bool) -> usize {
    events.iter().filter(|e| pred(e)).count()
}

#[actix_rt::test]
async fn a_flapping_link_reaches_the_recipes_as_one_suspension() {
    init_tracing();
    let zk = TestZooKeeper::shared().expect("ZooKeeper");
    let root = unique_root("damper");
    let links = ClientLinks::to([zk.connect_string()]).expect("proxy");
    let base = || {
        SessionConfig::new(links.connect_string())
            .with_chroot(root.clone())
            .with_session_timeout(Duration::from_secs(6))
    };
    let (damped, damped_events) = connected(base().with_flap_damper(Duration::from_millis(1500))).await;
    let (plain, plain_events) = connected(base()).await;
    let lock = LockHandle::start(damped.clone(), LockConfig::new("/lock")).expect("lock");
    let lock_events = Recorded::<LockEvent>::start();
    lock.subscribe(lock_events.recipient.clone());
    let grant = bounded("acquire", lock.acquire(None)).await.expect("held");
    let (damped_from, plain_from) = (damped_events.snapshot().len(), plain_events.snapshot().len());

    // Eight drops, each followed by a reconnect, within about a second. A subscriber that joins
    // half-way hears the damper's view (suspended), not the link's of that moment.
    let late = Recorded::<SessionEvent>::start();
    for flap in 0..8 {
        links.proxy(0).reset();
        actix_rt::time::sleep(Duration::from_millis(150)).await;
        if flap == 3 {
            damped.subscribe(late.recipient.clone());
        }
    }
    // The link settles; the damper's window ends with it up.
    wait_until("the damped session says it is back", || {
        damped_events.snapshot()[damped_from..].iter().any(|e| matches!(e, SessionEvent::Reconnected { .. }))
    })
    .await;
    actix_rt::time::sleep(Duration::from_secs(2)).await;

    let plain_seen = plain_events.snapshot()[plain_from..].to_vec();
    assert!(
        count(&plain_seen, |e| matches!(e, SessionEvent::Suspended { .. })) >= 3,
        "the control: without the damper every drop is told: {plain_seen:#?}"
    );
    let damped_seen = damped_events.snapshot()[damped_from..].to_vec();
    assert_eq!(
        (
            count(&damped_seen, |e| matches!(e, SessionEvent::Suspended { .. })),
            count(&damped_seen, |e| matches!(e, SessionEvent::Reconnected { .. }))
        ),
        (1, 1),
        "one pair: {damped_seen:#?}"
    );
    assert!(matches!(damped_seen.last(), Some(SessionEvent::Reconnected { .. })), "{damped_seen:#?}");
    let late_seen = late.snapshot();
    assert!(
        matches!(late_seen.first(), Some(SessionEvent::Suspended { .. }))
            && count(&late_seen, |e| matches!(e, SessionEvent::Reconnected { .. })) == 1
            && matches!(late_seen.last(), Some(SessionEvent::Reconnected { .. })),
        "the late subscriber: suspended, then one reconnect: {late_seen:#?}"
    );
    // The lock heard one suspension and its end, and still holds (no false loss).
    let told = lock_events.snapshot();
    let suspensions = told.iter().filter(|e| matches!(e, LockEvent::Suspended { .. })).count();
    let lost = told.iter().any(|e| matches!(e, LockEvent::Lost { .. }));
    assert_eq!((suspensions, lost), (1, false), "{told:#?}");
    lock_events.wait_for(0, Duration::from_secs(10), |e| matches!(e, LockEvent::Reconnected { .. })).await;
    let write = grant
        .guarded_write(&damped, vec![Op::SetData { path: "/lock".into(), data: b"still".to_vec(), version: None }]);
    write.await.expect("the grant still stands");
    lock.release().await.expect("release");
    damped.close().await;
    plain.close().await;
}

#[test]
fn a_window_longer_than_half_the_session_timeout_is_refused() {
    let config = SessionConfig::new("127.0.0.1:2181")
        .with_session_timeout(Duration::from_secs(4))
        .with_flap_damper(Duration::from_secs(3));
    match config.validate() {
        Err(Error::BadArguments { path, reason }) => {
            assert_eq!(path, "SessionConfig::with_flap_damper");
            assert!(reason.contains("half the session timeout"), "{reason}");
        }
        other => panic!("expected BadArguments, got {other:?}"),
    }
    assert!(SessionConfig::new("127.0.0.1:2181").with_flap_damper(Duration::ZERO).validate().is_err());
}
