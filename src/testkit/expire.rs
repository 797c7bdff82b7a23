//! Server-side session expiry, the way Curator's `KillSession` does it: take the session over
//! from a second client and close it, so the server really ends it (ephemerals deleted, watchers
//! of other sessions fired, the original client told `SessionExpired` on its next reconnect).

use std::time::{Duration, Instant};

use zookeeper_client::{Client, SessionInfo};

use super::TestkitError;

const CONFIRM_TIMEOUT: Duration = Duration::from_secs(10);
/// After taking the session over: time for the dropped client's background task to send
/// CloseSession.
const CLOSE_INTERVAL: Duration = Duration::from_millis(100);
/// After losing a take-over race (see below): retry almost at once, each attempt is a new draw.
const RACE_INTERVAL: Duration = Duration::from_millis(10);

/// Expires `session` on the server behind `connect_string` and waits (up to ~10 s) until the
/// server confirms it by refusing the session with `SessionExpired`.
///
/// The client that owns the session is not touched; it observes the expiry like it would in
/// production (`SessionState::Expired` on its state watcher).
///
/// Taking the session over is a race: the server drops the owner's connection when the second
/// client connects, the owner reconnects within a millisecond and the server then drops the
/// second client's connection, often before that client's handshake (connect response plus a
/// ping) completes. Attempts are repeated every 10 ms until one wins; on loopback that took
/// 0.1–0.6 s (with 100 ms between attempts it took up to 4.6 s).
pub async fn expire_session(connect_string: &str, session: &SessionInfo) -> Result<(), TestkitError> {
    let session_id = session.id().0;
    let started = Instant::now();
    let deadline = started + CONFIRM_TIMEOUT;
    let mut taken_over = false;
    loop {
        let last = match connect_with(connect_string, session, deadline).await {
            Ok(client) => {
                // Dropping the last clone of a non-detached client sends CloseSession: that is
                // the expiry. Should a later attempt still find the session alive (the close is
                // sent by a background task), that client closes it in turn.
                drop(client);
                taken_over = true;
                None
            }
            Err(Some(zookeeper_client::Error::SessionExpired)) => {
                tracing::info!(session = %session.id(), elapsed = ?started.elapsed(), "expired ZooKeeper session");
                return Ok(());
            }
            Err(error) => error,
        };
        if Instant::now() >= deadline {
            return Err(match last {
                Some(source) if !taken_over => TestkitError::Expire { source },
                last => TestkitError::ExpireNotConfirmed {
                    session_id,
                    waited: started.elapsed(),
                    last: match last {
                        Some(error) => format!("reconnect failed: {error}"),
                        None if taken_over => "session still alive".to_owned(),
                        None => "reconnect timed out".to_owned(),
                    },
                },
            });
        }
        tokio::time::sleep(if taken_over && last.is_none() { CLOSE_INTERVAL } else { RACE_INTERVAL }).await;
    }
}

/// `Err(None)` on timeout.
async fn connect_with(
    connect_string: &str,
    session: &SessionInfo,
    deadline: Instant,
) -> Result<Client, Option<zookeeper_client::Error>> {
    let connect = Client::connector()
        .with_session(session.clone())
        // Without this the connector cycles over the hosts until its session timeout.
        .with_fail_eagerly()
        .connect(connect_string);
    match tokio::time::timeout_at(deadline.into(), connect).await {
        Ok(result) => result.map_err(Some),
        Err(_) => Err(None),
    }
}
