//! The `election` role: a participant whose leader actor writes term records while it leads.

use super::*;

pub(crate) struct ElectionPlan {
    pub(crate) path: String,
    pub(crate) history: String,
    pub(crate) writes: u64,
    pub(crate) interval: Duration,
    pub(crate) unfenced: bool,
    /// Start each write only while the term is certainly held (`Fence::check_current`), and
    /// print `current term=<t> until=<unix ms>` before it, or `refused term=<t>` instead of it.
    pub(crate) guarded: bool,
}

/// Counts shared by every term's leader actor (all on this thread).
#[derive(Default)]
pub(crate) struct Tally {
    /// Writes attempted so far; the next one's `n`.
    pub(crate) attempts: Cell<u64>,
    /// Writes that returned Ok.
    pub(crate) ok: Cell<u64>,
    /// A write is under way (from this term or an earlier one): one at a time.
    pub(crate) busy: Cell<bool>,
}

/// Leads in leader-actor mode, writes while leading, and resigns for good after enough writes.
pub(crate) async fn election_role(session: &SessionHandle, id: &str, plan: ElectionPlan) -> Result<(), String> {
    patiently("create the history directory", || session.ensure_path(&plan.history)).await?;
    let tally = Rc::new(Tally::default());
    let (enough, mut enough_rx) = mpsc::unbounded();
    let plan = Rc::new(plan);
    let leader = {
        let (session, id, plan) = (session.clone(), id.to_owned(), Rc::clone(&plan));
        move |term: LeaderTerm| TermWriter {
            session: session.clone(),
            id: id.clone(),
            term,
            plan: Rc::clone(&plan),
            tally: Rc::clone(&tally),
            enough: enough.clone(),
        }
    };
    let config = ElectionConfig::new(&plan.path).with_participant_id(id).with_leader_actor(leader);
    let election = ElectionActor::new(session.clone(), config).start();
    let printer = Printer::<ElectionEvent>::printing(&election);
    if plan.writes > 0 {
        enough_rx.next().await;
    }
    match election.send(Resign { requeue: false }).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => return Err(format!("resign: {error}")),
        Err(_) => return Err("the election actor stopped".into()),
    }
    // Its `lost ... reason=Resigned` comes before our `done`.
    let _ = printer.send(Flush).await;
    emit!("done");
    Ok(())
}

/// The leader's work during one term: a fenced write every `interval`.
pub(crate) struct TermWriter {
    pub(crate) session: SessionHandle,
    pub(crate) id: String,
    pub(crate) term: LeaderTerm,
    /// Where and how it writes: the role's plan.
    pub(crate) plan: Rc<ElectionPlan>,
    pub(crate) tally: Rc<Tally>,
    pub(crate) enough: mpsc::UnboundedSender<()>,
}

impl Actor for TermWriter {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        ctx.run_interval(self.plan.interval, |act, _| act.write());
    }
}

impl TermWriter {
    fn write(&mut self) {
        let tally = Rc::clone(&self.tally);
        if tally.busy.get() || tally.ok.get() >= self.plan.writes {
            return;
        }
        let term = self.term.token.0;
        if self.plan.guarded {
            match self.term.check_current() {
                Ok(left) => {
                    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
                    emit!("current", term = term, until = (now + left).as_millis());
                }
                Err(_) => {
                    emit!("refused", term = term);
                    return;
                }
            }
        }
        tally.busy.set(true);
        let n = tally.attempts.get() + 1;
        tally.attempts.set(n);
        let create = Op::Create {
            path: path::join(&self.plan.history, &format!("e-{term}-{n}")),
            data: format!("term={term} writer={} n={n}", self.id).into_bytes(),
            mode: CreateMode::Persistent,
        };
        let ops = if self.plan.unfenced { vec![create] } else { self.term.guard(vec![create]) };
        let session = self.session.clone();
        let (writes, enough) = (self.plan.writes, self.enough.clone());
        // Detached: the outcome is printed even when the term ends (and this actor stops)
        // while the write is under way.
        actix::spawn(async move {
            let (outcome, error) = write_until_known(|| {
                let sent = session.multi(ops.clone());
                async move {
                    match sent.await {
                        Ok(_) => Tried::Applied,
                        Err(error) => Tried::from_error(&error),
                    }
                }
            })
            .await;
            tally.busy.set(false);
            match error {
                None => {
                    tally.ok.set(tally.ok.get() + 1);
                    emit!("write", term = term, n = n, outcome = outcome);
                    if tally.ok.get() == writes {
                        let _ = enough.unbounded_send(());
                    }
                }
                Some(error) => emit!("write", term = term, n = n, outcome = outcome, error = error),
            }
        });
    }
}

impl Handler<StopLeading> for TermWriter {
    type Result = ();

    fn handle(&mut self, _: StopLeading, ctx: &mut Context<Self>) {
        ctx.stop();
    }
}

impl Printed for ElectionEvent {
    fn print(self) {
        match self {
            ElectionEvent::LeadershipAcquired { token } => emit!("leader", token = token.0),
            ElectionEvent::LeadershipSuspended { token } => emit!("suspended", token = token.0),
            ElectionEvent::LeadershipRestored { token } => emit!("restored", token = token.0),
            ElectionEvent::LeadershipLost { token, reason } => {
                emit!("lost", token = token.0, reason = format!("{reason:?}"))
            }
            ElectionEvent::LeaderChanged { leader_id } => {
                emit!("leader-changed", leader = leader_id.as_deref().unwrap_or("none"))
            }
            ElectionEvent::ElectionFailed { error } => emit!("election-failed", error = error),
            _ => {}
        }
    }
}
