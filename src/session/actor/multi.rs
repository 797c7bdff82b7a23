//! The `multi` request: its handler, and the translation of the server's reply into one
//! result per operation (checked against the request: a reply that does not fit is an error,
//! never a panic).

use super::*;

impl Handler<Multi> for SessionActor {
    type Result = ResponseFuture<Result<Vec<OpResult>>>;

    fn handle(&mut self, msg: Multi, _: &mut Context<Self>) -> Self::Result {
        // Nothing to send (the client library would answer without sending, and that answer
        // must not count as the server's).
        if msg.ops.is_empty() {
            return Box::pin(futures::future::ready(Ok(Vec::new())));
        }
        for (index, op) in msg.ops.iter().enumerate() {
            let sequential = matches!(op, Op::Create { mode, .. } if mode.is_sequential());
            if let Err(err) = self.check(op.path(), sequential) {
                return failed(Error::Multi { index, source: Box::new(err) });
            }
        }
        // A create of a kind the server is known to lack is refused before anything is sent (as
        // a single create is); one not known either way learns it from the server's answer.
        for (index, op) in msg.ops.iter().enumerate() {
            if let Op::Create { path, mode, .. } = op
                && let feature = multi_create_needs(*mode)
                && !self.features.may_have(feature)
            {
                let source = Box::new(Error::Unsupported { path: path.clone(), feature });
                return failed(Error::Multi { index, source });
            }
        }
        let features = self.features.clone();
        let acl = self.config.default_acl().to_vec();
        let first = msg.ops.first().map(|op| op.path().to_string()).unwrap_or_else(|| "/".into());
        // The whole request counts, not each op: a `multi` of small ops can be too large.
        // Named by the op that weighs most: the one whose data made it too large.
        let heaviest = msg
            .ops
            .iter()
            .max_by_key(|op| sizing::multi(std::slice::from_ref(*op), &acl, self.chroot_len()))
            .map_or("/", |op| op.path());
        if let Err(err) = self.check_size(heaviest, sizing::multi(&msg.ops, &acl, self.chroot_len())) {
            return failed(err);
        }
        let span = self.span("multi", &first);
        self.dispatch(span, move |client, _, _| {
            Box::pin(async move {
                let ops = msg.ops;
                let mut writer = client.new_multi_writer();
                for (index, op) in ops.iter().enumerate() {
                    let added = match op {
                        Op::Check { path, version } => writer.add_check_version(path, *version),
                        Op::Create { path, data, mode } => writer.add_create(path, data, &mode.options(&acl)),
                        Op::SetData { path, data, version } => writer.add_set_data(path, data, *version),
                        Op::Delete { path, version } => writer.add_delete(path, *version),
                    };
                    added.map_err(|e| Error::Multi { index, source: Box::new(Error::from_zk(op.path(), e)) })?;
                }
                let reply = writer.commit().await;
                if reply.is_ok() {
                    // Every create in it was sent as what it needs: the server has that.
                    for op in &ops {
                        if let Op::Create { mode, .. } = op {
                            features.learned(multi_create_needs(*mode), true);
                        }
                    }
                }
                if let Some((index, feature)) = refused_create(&ops, &reply, &features) {
                    features.learned(feature, false);
                    let source = Box::new(Error::Unsupported { path: ops[index].path().to_owned(), feature });
                    return Err(Error::Multi { index, source });
                }
                multi_reply(&ops, &first, reply)
            })
        })
    }
}

/// What a create inside a `multi` needs of the server: its mode's feature (a container or TTL
/// create), or else `create2`, because the client library encodes every other create in a
/// `multi` as a `create2`, whatever the server's declared version: a ZooKeeper 3.4 cannot read
/// such a `multi` at all.
fn multi_create_needs(mode: CreateMode) -> crate::session::Feature {
    mode.needs().unwrap_or(crate::session::Feature::Create2)
}

/// When a `multi`'s `reply` is an `Unimplemented` that a create of `ops` explains for certain:
/// that create's index and the feature it needs (learnt absent: a wrong guess would refuse later
/// requests for good).
///
/// - The server named the op (a real server refuses a container or TTL create it lacks at
///   its index).
/// - The server refused the request as a whole (it cannot read it, as a 3.4 cannot read a
///   `create2` inside it), and exactly one feature the creates need is not known to be there:
///   the first create needing it. With none or several candidates (a server without `multi` at
///   all, a container and a TTL create together), nothing is blamed: the answer stays
///   `Unimplemented`.
fn refused_create(
    ops: &[Op],
    reply: &std::result::Result<Vec<MultiWriteResult>, MultiWriteError>,
    features: &crate::session::Features,
) -> Option<(usize, crate::session::Feature)> {
    use zookeeper_client::Error::Unimplemented;
    let needs = |op: &Op| match op {
        Op::Create { mode, .. } => Some(multi_create_needs(*mode)),
        _ => None,
    };
    match reply {
        Err(MultiWriteError::OperationFailed { index, source: Unimplemented }) => {
            ops.get(*index).and_then(needs).map(|feature| (*index, feature))
        }
        Err(MultiWriteError::RequestFailed { source: Unimplemented }) => {
            let mut candidates = Vec::new();
            for feature in ops.iter().filter_map(needs) {
                if features.support(feature) != crate::session::Support::Yes && !candidates.contains(&feature) {
                    candidates.push(feature);
                }
            }
            let [feature] = candidates[..] else { return None };
            ops.iter().position(|op| needs(op) == Some(feature)).map(|index| (index, feature))
        }
        _ => None,
    }
}

/// Translates the server's reply to a `multi` of `ops`; `first` is the first op's path.
///
/// Every index and count in the reply is checked against the request: the reply comes from the
/// network, and one that does not fit must fail this request, not panic the task serving it.
fn multi_reply(
    ops: &[Op],
    first: &str,
    reply: std::result::Result<Vec<MultiWriteResult>, MultiWriteError>,
) -> Result<Vec<OpResult>> {
    let unexpected = |reason: String| Error::UnexpectedReply { path: first.to_owned(), reason };
    let results = match reply {
        Ok(results) => results,
        Err(MultiWriteError::RequestFailed { source }) => return Err(Error::from_zk(first, source)),
        Err(MultiWriteError::OperationFailed { index, source }) => {
            return Err(match ops.get(index) {
                Some(op) => Error::Multi { index, source: Box::new(Error::from_zk(op.path(), source)) },
                None => unexpected(format!(
                    "operation #{index} failed ({source}), but the multi has {} operations",
                    ops.len()
                )),
            });
        }
    };
    if results.len() != ops.len() {
        return Err(unexpected(format!("{} results for {} operations", results.len(), ops.len())));
    }
    ops.iter()
        .zip(results)
        .enumerate()
        .map(|(index, (op, result))| match (op, result) {
            (Op::Check { .. }, MultiWriteResult::Check) => Ok(OpResult::Checked),
            (Op::Create { .. }, MultiWriteResult::Create { path, stat }) => Ok(OpResult::Created { path, stat }),
            (Op::SetData { .. }, MultiWriteResult::SetData { stat }) => Ok(OpResult::DataSet { stat }),
            (Op::Delete { .. }, MultiWriteResult::Delete) => Ok(OpResult::Deleted),
            (op, other) => Err(unexpected(format!("result #{index} is {other:?} for an operation on {}", op.path()))),
        })
        .collect()
}

/// A real server never sends a `multi` reply that does not fit the request, so these feed the
/// translation crafted replies (see "Why a unit test here" in `docs/decisions.md`).
#[cfg(test)]
mod tests {
    use zookeeper_client::{MultiWriteError, MultiWriteResult, Stat};

    use super::{multi_reply, refused_create};
    use crate::error::Error;
    use crate::session::requests::{CreateMode, Op, OpResult};
    use crate::session::{Feature, Features};

    fn create(path: &str, mode: CreateMode) -> Op {
        Op::Create { path: path.into(), data: Vec::new(), mode }
    }

    #[test]
    fn a_refused_create_is_blamed_only_when_certain() {
        use zookeeper_client::Error::Unimplemented;
        let whole = || Err(MultiWriteError::RequestFailed { source: Unimplemented });
        let unknown = Features::new(None);
        let plain = vec![Op::Check { path: "/g".into(), version: 0 }, create("/a", CreateMode::Persistent)];
        assert_eq!(refused_create(&plain, &whole(), &unknown), Some((1, Feature::Create2)), "one candidate");
        let container = vec![create("/a", CreateMode::Container)];
        assert_eq!(refused_create(&container, &whole(), &unknown), Some((0, Feature::Containers)));
        let both = vec![create("/a", CreateMode::Container), create("/b", CreateMode::Persistent)];
        assert_eq!(refused_create(&both, &whole(), &unknown), None, "two candidates: no guess");
        let known = Features::new(None);
        known.learned(Feature::Create2, true);
        assert_eq!(refused_create(&both, &whole(), &known), Some((0, Feature::Containers)), "create2 is there");
        let no_creates = vec![Op::Delete { path: "/a".into(), version: None }];
        assert_eq!(refused_create(&no_creates, &whole(), &unknown), None, "a server without multi");
        let ttl = vec![
            create("/a", CreateMode::Persistent),
            create("/t", CreateMode::PersistentWithTtl(std::time::Duration::from_secs(1))),
        ];
        let at_op = Err(MultiWriteError::OperationFailed { index: 1, source: Unimplemented });
        assert_eq!(refused_create(&ttl, &at_op, &known), Some((1, Feature::Ttl)), "the server named the op");
        let other = Err(MultiWriteError::OperationFailed { index: 1, source: zookeeper_client::Error::NoNode });
        assert_eq!(refused_create(&ttl, &other, &known), None);
    }

    fn stat() -> Stat {
        Stat {
            czxid: 1,
            mzxid: 2,
            pzxid: 1,
            ctime: 0,
            mtime: 0,
            version: 1,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 1,
            num_children: 0,
        }
    }

    fn ops() -> Vec<Op> {
        vec![
            Op::Check { path: "/guard".into(), version: 0 },
            Op::SetData { path: "/data".into(), data: b"x".to_vec(), version: None },
        ]
    }

    fn unexpected(reply: std::result::Result<Vec<MultiWriteResult>, MultiWriteError>) -> String {
        match multi_reply(&ops(), "/guard", reply) {
            Err(Error::UnexpectedReply { path, reason }) => {
                assert_eq!(path, "/guard", "names the request's first path");
                reason
            }
            other => panic!("expected UnexpectedReply, got {other:?}"),
        }
    }

    #[test]
    fn a_failure_at_an_index_the_request_does_not_have_is_an_error_not_a_panic() {
        let reason =
            unexpected(Err(MultiWriteError::OperationFailed { index: 2, source: zookeeper_client::Error::NoNode }));
        assert!(reason.contains('2'), "{reason}");
        unexpected(Err(MultiWriteError::OperationFailed {
            index: usize::MAX,
            source: zookeeper_client::Error::NoNode,
        }));
    }

    #[test]
    fn more_results_than_operations_is_an_error_not_a_panic() {
        unexpected(Ok(vec![
            MultiWriteResult::Check,
            MultiWriteResult::SetData { stat: stat() },
            MultiWriteResult::Delete,
        ]));
    }

    #[test]
    fn fewer_results_than_operations_is_an_error() {
        unexpected(Ok(vec![MultiWriteResult::Check]));
        unexpected(Ok(vec![]));
    }

    #[test]
    fn a_result_of_another_kind_than_its_operation_is_an_error() {
        unexpected(Ok(vec![MultiWriteResult::Check, MultiWriteResult::Delete]));
    }

    #[test]
    fn a_fitting_reply_is_translated() {
        let stat = stat();
        assert_eq!(
            multi_reply(&ops(), "/guard", Ok(vec![MultiWriteResult::Check, MultiWriteResult::SetData { stat }])),
            Ok(vec![OpResult::Checked, OpResult::DataSet { stat }])
        );
        assert_eq!(
            multi_reply(
                &ops(),
                "/guard",
                Err(MultiWriteError::OperationFailed { index: 1, source: zookeeper_client::Error::BadVersion })
            ),
            Err(Error::Multi { index: 1, source: Box::new(Error::BadVersion { path: "/data".into() }) })
        );
        assert_eq!(
            multi_reply(
                &ops(),
                "/guard",
                Err(MultiWriteError::RequestFailed { source: zookeeper_client::Error::ConnectionLoss })
            ),
            Err(Error::ConnectionLoss { path: "/guard".into() })
        );
    }
}
