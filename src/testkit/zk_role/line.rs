//! What `zk-role` prints: one line per event, and each write's outcome as `ok`, `failed` or
//! `unknown` (a write whose outcome is unknown is sent again, the way a careful user would).

use super::*;

/// Prints one line: `emit!("write", value = v, outcome = "ok")`.
macro_rules! emit {
    ($kind:expr $(, $key:ident = $value:expr)* $(,)?) => {
        print_line($kind, &[$((stringify!($key), ($value).to_string())),*])
    };
}

pub(crate) fn print_line(kind: &str, fields: &[(&str, String)]) {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    let mut line = format!("{now} {kind}");
    for (key, value) in fields {
        let value: String = value.chars().map(|c| if c.is_whitespace() { '_' } else { c }).collect();
        let _ = write!(line, " {key}={value}");
    }
    line.push('\n');
    // One write per line under the lock, flushed: whole lines, seen by the test as they happen.
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}

/// A `Debug` rendering without any whitespace, for `what=` fields.
pub(crate) fn compact(value: &impl std::fmt::Debug) -> String {
    format!("{value:?}").chars().filter(|c| !c.is_whitespace()).collect()
}

/// What a failed request proves about its effect.
pub(crate) fn outcome(error: &Error) -> &'static str {
    match error {
        // The server refused the transaction as a whole, or it was never sent.
        error if error.was_not_applied() => "failed",
        _ => "unknown",
    }
}

pub(crate) fn lock_outcome(error: &LockError) -> &'static str {
    match error {
        LockError::NoLongerHeld { .. } => "failed",
        LockError::ZooKeeper(error) => outcome(error),
        _ => "unknown",
    }
}

pub(crate) fn ack_outcome(error: &QueueError) -> &'static str {
    match error {
        // Documented as "nothing was changed" by the consumer.
        QueueError::Revoked { .. } | QueueError::ClaimLost { .. } | QueueError::UnknownDelivery { .. } => "failed",
        QueueError::ZooKeeper(error) => outcome(error),
        _ => "unknown",
    }
}

/// How often a write whose outcome is unknown is sent again, and how far apart.
pub(crate) const WRITE_TRIES: usize = 5;
pub(crate) const WRITE_RETRY: Duration = Duration::from_millis(200);

/// What one try of a self-recording write proved.
pub(crate) enum Tried {
    /// It returned Ok.
    Applied,
    /// Its record already exists: an earlier try applied.
    RecordExists,
    /// Nothing of it applied.
    Failed(String),
    /// It may or may not have applied.
    Unknown(String),
}

impl Tried {
    /// Classifies a ZooKeeper error of a write whose only `create` is its own record.
    pub(crate) fn from_error(error: &Error) -> Tried {
        match error {
            Error::Multi { source, .. } if matches!(**source, Error::NodeExists { .. }) => Tried::RecordExists,
            Error::NodeExists { .. } => Tried::RecordExists,
            error if outcome(error) == "failed" => Tried::Failed(error.to_string()),
            error => Tried::Unknown(error.to_string()),
        }
    }
}

/// Sends a write that records itself under a name of its own, again while its outcome is
/// unknown, as a careful user would: the record makes the retry idempotent (`NodeExists` on it
/// proves an earlier try applied). Returns the outcome over all tries (`ok`, or `unknown` when
/// any try may have applied, else `failed`) and the last error.
pub(crate) async fn write_until_known<F, Fut>(mut attempt: F) -> (&'static str, Option<String>)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Tried>,
{
    let mut unsure: Option<String> = None;
    for _ in 0..WRITE_TRIES {
        match attempt().await {
            Tried::Applied => return ("ok", None),
            Tried::RecordExists if unsure.is_some() => return ("ok", None),
            // Nobody else writes our record: without an earlier try this is a broken premise.
            Tried::RecordExists => return ("failed", Some("the write's record exists already".into())),
            Tried::Failed(error) => return (if unsure.is_some() { "unknown" } else { "failed" }, Some(error)),
            Tried::Unknown(error) => unsure = Some(error),
        }
        tokio::time::sleep(WRITE_RETRY).await;
    }
    ("unknown", unsure)
}

/// Answers once every message sent to an actor before it has been handled (mailboxes are
/// FIFO), so that a line printed by that actor comes before the next line of the caller.
#[derive(Message)]
#[rtype(result = "()")]
pub(crate) struct Flush;

/// A recipe's events, printed as lines by a [`Printer`].
pub(crate) trait Printed: Message<Result = ()> + Send + 'static {
    /// Prints what this event says (nothing, for one the role does not print).
    fn print(self);
}

/// An actor that prints the events of the recipe it subscribes to; answers [`Flush`] once it
/// has printed every event sent before.
pub(crate) struct Printer<E>(std::marker::PhantomData<fn(E)>);

impl<E: Printed> Printer<E> {
    /// Started on the caller's Arbiter. Subscribing does not keep it alive: keep its address for
    /// as long as the role runs.
    pub(crate) fn start_printing() -> Addr<Printer<E>> {
        Printer(std::marker::PhantomData).start()
    }

    /// Started and subscribed to `recipe`'s events.
    pub(crate) fn printing<A>(recipe: &Addr<A>) -> Addr<Printer<E>>
    where
        A: Actor + Handler<actix_zookeeper::events::Subscribe<E>>,
        A::Context: actix::dev::ToEnvelope<A, actix_zookeeper::events::Subscribe<E>>,
    {
        let printer = Self::start_printing();
        recipe.do_send(actix_zookeeper::events::Subscribe { recipient: printer.clone().recipient() });
        printer
    }
}

/// Keeps `kept` (a recipe's and its printer's addresses: dropping the last one would stop it)
/// until the role's process is killed, which is how such a role ends.
pub(crate) async fn until_killed<T>(kept: T) -> Result<(), String> {
    futures::future::pending::<()>().await;
    drop(kept);
    Ok(())
}

impl<E: Printed> Actor for Printer<E> {
    type Context = Context<Self>;
}

impl<E: Printed> Handler<E> for Printer<E> {
    type Result = ();

    fn handle(&mut self, event: E, _: &mut Context<Self>) {
        event.print();
    }
}

impl<E: Printed> Handler<Flush> for Printer<E> {
    type Result = ();

    fn handle(&mut self, _: Flush, _: &mut Context<Self>) {}
}
