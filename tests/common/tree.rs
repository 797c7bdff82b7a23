//! A tree of nodes that writers change at random, and a walk that reads it back from the
//! server: what cache tests compare a cache with.

use std::collections::BTreeMap;
use std::time::Duration;

use actix_zookeeper::prelude::*;

/// Every node under `root` (itself included) with its data, read from the server.
pub async fn walk(s: &SessionHandle, root: &str) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut level = vec![root.to_owned()];
    while !level.is_empty() {
        let reads: Vec<_> = level.iter().map(|p| (p.clone(), s.get_data(p), s.children(p))).collect();
        let mut next = Vec::new();
        for (path, data, children) in reads {
            let (Ok(data), Ok(children)) = (data.await, children.await) else { continue };
            out.insert(path.clone(), data.data);
            next.extend(children.names.iter().map(|c| actix_zookeeper::path::join(&path, c)));
        }
        level = next;
    }
    out
}

/// A writer: `ops` random creates, updates and deletes over `paths` leaf paths under `/t`.
pub async fn write_randomly(s: SessionHandle, seed: u64, ops: usize, paths: usize) -> usize {
    let mut state = seed | 1;
    let mut done = 0;
    while done < ops {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let n = (state % paths as u64) as usize;
        let path = format!("/t/d{}/n{}", n % 10, n / 10);
        let data = format!("{seed}-{done}").into_bytes();
        let outcome = match state % 3 {
            0 => s.create(&path, data, CreateMode::Persistent).await.map(|_| ()),
            1 => s.set_data(&path, data, None).await.map(|_| ()),
            _ => s.delete(&path, None).await,
        };
        match outcome {
            Ok(()) | Err(Error::NoNode { .. }) | Err(Error::NodeExists { .. }) => done += 1,
            // A fault in progress: try another op.
            Err(e) if e.is_transient() => actix_rt::time::sleep(Duration::from_millis(20)).await,
            Err(e) => panic!("writer {seed}: {e}"),
        }
    }
    done
}

/// Creates the ten directories `/t/d0` … `/t/d9` the writers write under.
pub async fn prepare_dirs(s: &SessionHandle) {
    for d in 0..10 {
        s.ensure_path(&format!("/t/d{d}")).await.expect("dir");
    }
}
