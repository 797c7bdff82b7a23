//! The handlers of the node requests (`session/requests.rs`): create, delete, reads with or
//! without a watch, `setData`, `sync`, `ensure_path`, recursive delete, and the `OnSession` and
//! `Told` wrappers that pin a request to a session or keep it alive without its caller. Each
//! checks its input, then hands the request to `dispatch`. Does not own `multi` (`multi.rs`).

use super::*;
use crate::retry::{Attempted, retried};

/// How many times the plain parents of a refused container create are sent when they meet the
/// connection the refusal closes.
const AFTER_REFUSAL_ATTEMPTS: u32 = 4;

impl SessionActor {
    /// The request `op` on `path`, once the path (and the request's `size`, when given) passed
    /// the checks: `send` sends it with the live session's client.
    fn on_path<T, F>(
        &mut self,
        op: &'static str,
        path: String,
        size: Option<usize>,
        send: impl FnOnce(Client, String) -> F + 'static,
    ) -> ResponseFuture<Result<T>>
    where
        T: 'static,
        F: Future<Output = Result<T>> + 'static,
    {
        let checked = self.check(&path, false).and_then(|()| size.map_or(Ok(()), |size| self.check_size(&path, size)));
        if let Err(err) = checked {
            return failed(err);
        }
        let span = self.span(op, &path);
        self.dispatch(span, move |client, _, _| Box::pin(send(client, path)))
    }
}

impl Handler<Create> for SessionActor {
    type Result = ResponseFuture<Result<Created>>;

    fn handle(&mut self, msg: Create, _: &mut Context<Self>) -> Self::Result {
        if let Err(err) = self.check(&msg.path, msg.mode.is_sequential()) {
            return failed(err);
        }
        let Create { path, data, mode, acl } = msg;
        let acl = acl.unwrap_or_else(|| self.config.default_acl().to_vec());
        if let Err(err) = self.check_size(&path, sizing::create(&path, &data, &acl, self.chroot_len())) {
            return failed(err);
        }
        let needs = mode.needs();
        if let Some(feature) = needs.filter(|feature| !self.features.may_have(*feature)) {
            return failed(Error::Unsupported { path, feature });
        }
        let features = self.features.clone();
        let span = self.span("create", &path);
        self.dispatch(span, move |client, _, _| {
            Box::pin(async move {
                let created = client.create(&path, &data, &mode.options(&acl)).await;
                let (stat, sequence) = match created {
                    Ok(created) => {
                        if let Some(feature) = needs {
                            features.learned(feature, true);
                        }
                        created
                    }
                    Err(error) => {
                        // Without a mode of its own to blame, a refused create is `create2`'s.
                        let feature = needs.unwrap_or(crate::session::Feature::Create2);
                        if matches!(error, zookeeper_client::Error::Unimplemented) {
                            features.learned(feature, false);
                        }
                        return Err(Error::from_zk_needing(&path, feature, error));
                    }
                };
                let made = if mode.is_sequential() { format!("{path}{sequence}") } else { path };
                // A plain `create` (a server declared older than 3.5) answers without the stat:
                // read it, for the recipes whose tokens are the czxid.
                let stat = match stat.is_invalid() {
                    // The node was made, but its stat cannot be told: say the outcome is
                    // unknown, so that the caller finds the node as after a lost reply.
                    true => match client.check_stat(&made).await {
                        Ok(Some(stat)) => stat,
                        _ => return Err(Error::ConnectionLoss { path: made }),
                    },
                    false => stat,
                };
                let sequence = mode.is_sequential().then(|| u64::try_from(sequence.into_i64()).ok()).flatten();
                Ok(Created { path: made, stat, sequence })
            })
        })
    }
}

impl Handler<Delete> for SessionActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: Delete, _: &mut Context<Self>) -> Self::Result {
        let Delete { path, version } = msg;
        self.on_path("delete", path, None, move |client, path| async move {
            client.delete(&path, version).await.map_err(|e| Error::from_zk(&path, e))
        })
    }
}

/// The three ways to ask a watched read: `$plain` (a bare recipient's watch, or none),
/// `Owned<$plain>` (a recipe actor's, which leaves as its owner drops) and `$until_dropped`
/// (plain async code's, which leaves as its receiver drops); `$read` does the reading.
macro_rules! watched_read {
    ($plain:ident, $until_dropped:ident => $read:ident) => {
        impl Handler<$plain> for SessionActor {
            type Result = ResponseFuture<<$plain as Message>::Result>;

            fn handle(&mut self, msg: $plain, _: &mut Context<Self>) -> Self::Result {
                self.$read(msg.path, msg.watch.map(|watcher| WatchSink::Actor(watcher.downgrade(), None)))
            }
        }

        impl Handler<Owned<$plain>> for SessionActor {
            type Result = ResponseFuture<<$plain as Message>::Result>;

            fn handle(&mut self, msg: Owned<$plain>, _: &mut Context<Self>) -> Self::Result {
                let Owned { request, gone } = msg;
                let sink = request.watch.map(|watcher| WatchSink::Actor(watcher.downgrade(), Some(gone)));
                self.$read(request.path, sink)
            }
        }

        impl Handler<$until_dropped> for SessionActor {
            type Result = ResponseFuture<<$plain as Message>::Result>;

            fn handle(&mut self, msg: $until_dropped, _: &mut Context<Self>) -> Self::Result {
                self.$read(msg.path, Some(WatchSink::Once(msg.tx)))
            }
        }
    };
}

watched_read!(GetData, GetDataUntilDropped => get_data);

impl SessionActor {
    fn get_data(&mut self, path: String, sink: Option<WatchSink>) -> ResponseFuture<Result<NodeData>> {
        if let Err(err) = self.check(&path, false) {
            return failed(err);
        }
        let span = self.span("get_data", &path);
        self.dispatch(span, move |client, generation, retired| {
            Box::pin(async move {
                let fail = |e| Error::from_zk(&path, e);
                match sink {
                    None => client.get_data(&path).await.map(|(data, stat)| NodeData { data, stat }).map_err(fail),
                    Some(sink) => {
                        let (data, stat, watcher) = client.get_and_watch_data(&path).await.map_err(fail)?;
                        deliver_once(watcher, path.clone(), sink, generation, retired, WatchEventKind::DataChanged);
                        Ok(NodeData { data, stat })
                    }
                }
            })
        })
    }

    fn get_children(&mut self, path: String, sink: Option<WatchSink>) -> ResponseFuture<Result<Children>> {
        if let Err(err) = self.check(&path, false) {
            return failed(err);
        }
        let span = self.span("get_children", &path);
        self.dispatch(span, move |client, generation, retired| {
            Box::pin(async move {
                let fail = |e| Error::from_zk(&path, e);
                match sink {
                    None => {
                        client.get_children(&path).await.map(|(names, stat)| Children { names, stat }).map_err(fail)
                    }
                    Some(sink) => {
                        let (names, stat, watcher) = client.get_and_watch_children(&path).await.map_err(fail)?;
                        deliver_once(watcher, path.clone(), sink, generation, retired, WatchEventKind::ChildrenChanged);
                        Ok(Children { names, stat })
                    }
                }
            })
        })
    }
}

impl Handler<SetData> for SessionActor {
    type Result = ResponseFuture<Result<Stat>>;

    fn handle(&mut self, msg: SetData, _: &mut Context<Self>) -> Self::Result {
        let size = sizing::set_data(&msg.path, &msg.data, self.chroot_len());
        let SetData { path, data, version } = msg;
        self.on_path("set_data", path, Some(size), move |client, path| async move {
            client.set_data(&path, &data, version).await.map_err(|e| Error::from_zk(&path, e))
        })
    }
}

impl Handler<GetAcl> for SessionActor {
    type Result = ResponseFuture<Result<(Vec<Acl>, Stat)>>;

    fn handle(&mut self, msg: GetAcl, _: &mut Context<Self>) -> Self::Result {
        self.on_path("get_acl", msg.path, None, move |client, path| async move {
            client.get_acl(&path).await.map_err(|e| Error::from_zk(&path, e))
        })
    }
}

impl Handler<SetAcl> for SessionActor {
    type Result = ResponseFuture<Result<Stat>>;

    fn handle(&mut self, msg: SetAcl, _: &mut Context<Self>) -> Self::Result {
        if let Err(err) = self.check(&msg.path, false) {
            return failed(err);
        }
        if msg.acl.is_empty() {
            // The server answers `InvalidAcl`; say so before sending, naming the node.
            return failed(Error::InvalidAcl { path: msg.path });
        }
        let span = self.span("set_acl", &msg.path);
        self.dispatch(span, move |client, _, _| {
            Box::pin(async move {
                client.set_acl(&msg.path, &msg.acl, msg.version).await.map_err(|e| Error::from_zk(&msg.path, e))
            })
        })
    }
}

watched_read!(Exists, ExistsUntilDropped => exists);

impl SessionActor {
    pub(super) fn exists(&mut self, path: String, sink: Option<WatchSink>) -> ResponseFuture<Result<Option<Stat>>> {
        if let Err(err) = self.check(&path, false) {
            return failed(err);
        }
        let span = self.span("exists", &path);
        self.dispatch(span, move |client, generation, retired| {
            Box::pin(async move {
                let fail = |e| Error::from_zk(&path, e);
                match sink {
                    None => client.check_stat(&path).await.map_err(fail),
                    Some(sink) => {
                        let (stat, watcher) = client.check_and_watch_stat(&path).await.map_err(fail)?;
                        deliver_once(watcher, path.clone(), sink, generation, retired, WatchEventKind::DataChanged);
                        Ok(stat)
                    }
                }
            })
        })
    }
}

watched_read!(GetChildren, GetChildrenUntilDropped => get_children);

/// `OnSession<M>` for the requests a pinned write needs (a blanket impl over every `M` sends
/// the trait solver into a loop).
macro_rules! on_session {
    ($($request:ty),*) => {$(
        impl Handler<OnSession<$request>> for SessionActor {
            type Result = <Self as Handler<$request>>::Result;

            fn handle(&mut self, msg: OnSession<$request>, ctx: &mut Context<Self>) -> Self::Result {
                // Checked in the handler that sends the request: nothing can switch sessions
                // between the check and the send, and the client of an ended session only
                // answers `Expired`.
                let same = matches!(self.state, State::Live(_)) && self.generation == msg.generation;
                if !same {
                    return failed(Error::SessionLost { path: msg.path });
                }
                <Self as Handler<$request>>::handle(self, msg.request, ctx)
            }
        }
    )*};
}

on_session!(Create, Delete, EnsurePath, Exists, GetData, GetChildren, SetData, Multi, Sync);

impl Handler<Sync> for SessionActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: Sync, _: &mut Context<Self>) -> Self::Result {
        self.on_path("sync", msg.path, None, move |client, path| async move {
            client.sync(&path).await.map_err(|e| Error::from_zk(&path, e))
        })
    }
}

impl Handler<EnsurePath> for SessionActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: EnsurePath, _: &mut Context<Self>) -> Self::Result {
        if let Err(err) = self.check(&msg.path, false) {
            return failed(err);
        }
        if msg.path == "/" {
            return Box::pin(futures::future::ready(Ok(())));
        }
        let acl = self.config.default_acl().to_vec();
        let span = self.span("ensure_path", &msg.path);
        // Containers where the server has them, plain persistent parents where it does not.
        let containers = msg.containers && self.features.may_have(crate::session::Feature::Containers);
        let features = self.features.clone();
        let backoff = self.config.retry().with_max_attempts(AFTER_REFUSAL_ATTEMPTS).backoff();
        self.dispatch(span, move |client, _, _| {
            Box::pin(async move {
                let mode = if containers { CreateMode::Container } else { CreateMode::Persistent };
                match client.mkdir(&msg.path, &mode.options(&acl)).await {
                    Err(zookeeper_client::Error::Unimplemented) if containers => {
                        features.learned(crate::session::Feature::Containers, false);
                        let plain = CreateMode::Persistent.options(&acl);
                        // The server closes the connection after refusing: the plain create
                        // may meet the closing connection. Making parents is idempotent, so
                        // it is sent again (the client reconnects by itself) a few times.
                        let (client, path, plain) = (&client, &msg.path, &plain);
                        retried(backoff, move || {
                            let made = client.mkdir(path, plain);
                            async move {
                                match made.await.map_err(|e| Error::from_zk(path, e)) {
                                    Ok(()) => Attempted::Done(()),
                                    Err(error @ Error::ConnectionLoss { .. }) => Attempted::Again(error),
                                    Err(error) => Attempted::Failed(error),
                                }
                            }
                        })
                        .await
                    }
                    made => made.map_err(|e| Error::from_zk(&msg.path, e)),
                }
            })
        })
    }
}

impl Handler<DeleteRecursive> for SessionActor {
    type Result = ResponseFuture<Result<()>>;

    fn handle(&mut self, msg: DeleteRecursive, _: &mut Context<Self>) -> Self::Result {
        self.on_path("delete_recursive", msg.path, None, move |client, path| async move {
            delete_tree(&client, &path).await
        })
    }
}

/// Deletes a subtree, deepest nodes first. A node that gains a child meanwhile (`NotEmpty`)
/// makes the whole walk start again, a few times, before giving up.
async fn delete_tree(client: &Client, root: &str) -> Result<()> {
    use zookeeper_client::Error as Zk;
    const ATTEMPTS: usize = 5;
    for _ in 0..ATTEMPTS {
        let mut nodes = vec![root.to_string()];
        let mut next = 0;
        while next < nodes.len() {
            match client.list_children(&nodes[next]).await {
                Ok(children) => {
                    let parent = nodes[next].clone();
                    nodes.extend(children.iter().map(|child| path::join(&parent, child)));
                }
                Err(Zk::NoNode) => {}
                Err(e) => return Err(Error::from_zk(&nodes[next], e)),
            }
            next += 1;
        }
        let mut raced = false;
        for node in nodes.iter().rev().filter(|node| node.as_str() != "/") {
            match client.delete(node, None).await {
                Ok(()) | Err(Zk::NoNode) => {}
                Err(Zk::NotEmpty) => {
                    raced = true;
                    break;
                }
                Err(e) => return Err(Error::from_zk(node, e)),
            }
        }
        if !raced {
            return Ok(());
        }
    }
    Err(Error::NotEmpty { path: root.to_string() })
}

/// Every request the handle makes, carried out whether or not its caller still waits.
impl<M> Handler<Told<M>> for SessionActor
where
    M: Message + Send + 'static,
    M::Result: Send,
    SessionActor: Handler<M>,
{
    type Result = ();

    fn handle(&mut self, told: Told<M>, ctx: &mut Context<Self>) {
        told.answer::<Self, _>(ctx, |request, ctx| <Self as Handler<M>>::handle(self, request, ctx));
    }
}
