//! Closing the session: `OnClose` hooks (recipes let go first, bounded in time), then the
//! server's close, answered to every caller of `Close`.

use super::*;

impl Handler<OnClose> for SessionActor {
    type Result = ();

    fn handle(&mut self, msg: OnClose, _: &mut Context<Self>) {
        self.goodbyes.retain(|weak| weak.upgrade().is_some_and(|r| r.connected()));
        self.goodbyes.push(msg.recipient.downgrade());
    }
}

impl Handler<Close> for SessionActor {
    type Result = ResponseActFuture<Self, ()>;

    fn handle(&mut self, _: Close, _: &mut Context<Self>) -> Self::Result {
        if let Some(waiters) = &mut self.closing {
            let (done, closed) = oneshot::channel();
            waiters.push(done);
            return Box::pin(
                async move {
                    let _ = closed.await;
                }
                .into_actor_free(),
            );
        }
        self.closing = Some(Vec::new());
        // Goodbyes first, while the session can still carry the recipes' deletes; whoever has not
        // answered within the bound is cut off by the close (the server deletes its ephemerals).
        let live = matches!(&self.state, State::Live(live) if matches!(live.link, Connection::Up));
        let recipes: Vec<_> = std::mem::take(&mut self.goodbyes).iter().filter_map(|weak| weak.upgrade()).collect();
        if !live || recipes.is_empty() {
            return Box::pin(actix::fut::ready(()).then(|(), act: &mut Self, ctx| act.close_now(ctx)));
        }
        info!(recipes = recipes.len(), "closing: the recipes let go first");
        let said = futures::future::join_all(recipes.iter().map(|recipe| recipe.send(Goodbye)));
        let bounded = async move {
            if tokio::time::timeout(GOODBYE_BOUND, said).await.is_err() {
                warn!(bound = ?GOODBYE_BOUND, "closing before every recipe let go");
            }
        };
        Box::pin(bounded.into_actor_free().then(|(), act: &mut Self, ctx| act.close_now(ctx)))
    }
}

impl SessionActor {
    fn close_now(&mut self, ctx: &mut Context<Self>) -> ResponseActFuture<Self, ()> {
        let State::Live(live) = &mut self.state else {
            self.finish(ctx);
            return Box::pin(actix::fut::ready(()));
        };
        if let Connection::Moving { task, .. } = live.link {
            // No client holds the session: the server ends it after its timeout.
            info!(session = %live.session_id, "closing a session that was moving");
            ctx.cancel_future(task);
            self.finish(ctx);
            return Box::pin(actix::fut::ready(()));
        }
        info!(session = %live.session_id, "closing the session");
        let mut watcher = live.client.state_watcher();
        // Dropping the last client clone makes the client library send CloseSession, so the
        // server deletes our ephemerals now rather than after the session timeout.
        ctx.cancel_future(live.state_task);
        self.state = State::Closed;
        for task in self.watches.take_tasks() {
            ctx.cancel_future(task);
        }
        let closed = async move {
            let _ =
                tokio::time::timeout(CLOSE_GRACE, async { while !watcher.changed().await.is_terminated() {} }).await;
        };
        Box::pin(closed.into_actor_free().map(|(), act: &mut Self, ctx| act.finish(ctx)))
    }
}
