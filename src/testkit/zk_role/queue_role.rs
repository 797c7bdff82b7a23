//! The `queue-consumer` role: an at-least-once consumer whose worker acks each item.

use super::*;

/// An at-least-once consumer with one worker actor that works `work` on each item, then acks.
pub(crate) async fn queue_consumer_role(
    session: &SessionHandle,
    id: &str,
    queue: &str,
    concurrency: usize,
    work: Duration,
) -> Result<(), String> {
    let worker = ItemWorker { work, items: Rc::default() }.start();
    let config =
        ConsumerConfig::new(queue).with_consumer_id(id).with_concurrency(concurrency).with_worker(Worker::new(&worker));
    let _consumer = QueueConsumerActor::new(session.clone(), config).start();
    futures::future::pending().await
}

pub(crate) struct ItemWorker {
    pub(crate) work: Duration,
    /// Items in hand, by node name, so that a revocation can name the item.
    pub(crate) items: Rc<RefCell<HashMap<String, String>>>,
}

impl Actor for ItemWorker {
    type Context = Context<Self>;
}

impl Handler<Delivery> for ItemWorker {
    type Result = ();

    fn handle(&mut self, delivery: Delivery, _: &mut Context<Self>) {
        let item = String::from_utf8_lossy(&delivery.data).into_owned();
        let token = delivery.token.0;
        emit!("delivered", item = item, attempt = delivery.attempt, token = token);
        self.items.borrow_mut().insert(delivery.id.clone(), item.clone());
        let (items, work) = (Rc::clone(&self.items), self.work);
        actix::spawn(async move {
            tokio::time::sleep(work).await;
            match delivery.ack().await {
                Ok(()) => emit!("ack", item = item, token = token, outcome = "ok"),
                Err(error) => emit!("ack", item = item, token = token, outcome = ack_outcome(&error), error = error),
            }
            items.borrow_mut().remove(&delivery.id);
        });
    }
}

impl Handler<Revoked> for ItemWorker {
    type Result = ();

    fn handle(&mut self, revoked: Revoked, _: &mut Context<Self>) {
        let item = self.items.borrow().get(&revoked.id).cloned().unwrap_or(revoked.id);
        emit!("revoked", item = item);
    }
}
