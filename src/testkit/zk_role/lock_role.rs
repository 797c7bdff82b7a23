//! The `lock` role: rounds of acquire, a fenced (or unfenced) counter increment, release.

use super::*;

pub(crate) struct LockPlan {
    pub(crate) dir: String,
    pub(crate) counter: String,
    pub(crate) history: String,
    pub(crate) rounds: u64,
    pub(crate) hold: Duration,
    pub(crate) unfenced: bool,
}

/// Rounds of read-modify-write on a counter outside the lock protocol, under the lock; each
/// write also records itself under the history directory, in the same transaction.
pub(crate) async fn lock_role(session: &SessionHandle, id: &str, plan: LockPlan) -> Result<(), String> {
    ensure_counter(session, &plan.counter).await?;
    patiently("create the history directory", || session.ensure_path(&plan.history)).await?;
    let lock = LockActor::new(session.clone(), LockConfig::new(&plan.dir).with_participant_id(id)).start();
    // Subscribing does not keep the printer alive: this address does, for the whole role.
    let _printer = Printer::<LockEvent>::printing(&lock);
    for round in 1..=plan.rounds {
        let grant = loop {
            match lock.send(Acquire { timeout: Some(ACQUIRE_TIMEOUT) }).await {
                Ok(Ok(grant)) => break grant,
                Ok(Err(error)) => emit!("acquire-error", error = error),
                Err(_) => return Err("the lock actor stopped".into()),
            }
            tokio::time::sleep(RETRY).await;
        };
        let token = grant.token.0;
        emit!("acquired", token = token, node = grant.node, round = round);
        let value = read_counter(session, &plan.counter).await?;
        emit!("read", value = value, round = round);
        tokio::time::sleep(plan.hold).await;
        let next = value + 1;
        let ops = vec![
            Op::SetData { path: plan.counter.clone(), data: next.to_string().into_bytes(), version: None },
            Op::Create {
                path: path::join(&plan.history, &format!("w-{token}")),
                data: format!("value={next} token={token} writer={id}").into_bytes(),
                mode: CreateMode::Persistent,
            },
        ];
        let (outcome, error) = write_until_known(|| {
            let written = if plan.unfenced {
                let sent = session.multi(ops.clone());
                futures::future::Either::Left(async move { sent.await.map_err(LockError::ZooKeeper) })
            } else {
                let sent = grant.guarded_write(session, ops.clone());
                futures::future::Either::Right(async move { sent.await.map_err(LockError::from) })
            };
            async move {
                match written.await {
                    Ok(_) => Tried::Applied,
                    Err(LockError::ZooKeeper(error)) => Tried::from_error(&error),
                    Err(error) if lock_outcome(&error) == "failed" => Tried::Failed(error.to_string()),
                    Err(error) => Tried::Unknown(error.to_string()),
                }
            }
        })
        .await;
        match error {
            None => emit!("write", value = next, token = token, outcome = outcome),
            Some(error) => emit!("write", value = next, token = token, outcome = outcome, error = error),
        }
        match lock.send(Release).await {
            Ok(Ok(())) => emit!("released", token = token),
            Ok(Err(error)) => emit!("release-error", error = error),
            Err(_) => return Err("the lock actor stopped".into()),
        }
    }
    emit!("done");
    Ok(())
}

/// Creates the counter with "0" unless it exists.
pub(crate) async fn ensure_counter(session: &SessionHandle, counter: &str) -> Result<(), String> {
    if let Some(parent) = path::parent(counter) {
        patiently("create the counter's parent", || session.ensure_path(parent)).await?;
    }
    let created = patiently("create the counter", || async {
        match session.create(counter, "0", CreateMode::Persistent).await {
            Ok(_) | Err(Error::NodeExists { .. }) => Ok(()),
            Err(error) => Err(error),
        }
    });
    created.await
}

pub(crate) async fn read_counter(session: &SessionHandle, counter: &str) -> Result<u64, String> {
    let node = patiently("read the counter", || session.get_data(counter)).await?;
    let text = String::from_utf8_lossy(&node.data);
    text.trim().parse().map_err(|_| format!("the counter {counter} holds {text:?}, not a number"))
}

/// What the lock tells besides grants and releases (which the rounds print).
impl Printed for LockEvent {
    fn print(self) {
        match self {
            LockEvent::Lost { token, reason, .. } => emit!("lost", token = token.0, reason = format!("{reason:?}")),
            LockEvent::Suspended { token, .. } => emit!("suspended", token = token.0),
            LockEvent::Reconnected { token, .. } => emit!("reconnected", token = token.0),
            _ => {}
        }
    }
}
