//! Three instances of a service register, each in a process of its own; a client round-robins
//! across them; one process is killed (SIGKILL, no goodbye) and disappears from the picks once
//! the server has expired its session. Printed in plain words.
//!
//! Run with `cargo run --features testkit --example discovery` (starts a local ZooKeeper unless
//! `ZK_CONNECT` is set). It checks who was picked, in which order, before and after the kill,
//! and exits non-zero if that is not what discovery promises.

mod support;

use std::error::Error;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use actix_zookeeper::discovery::{DiscoveryConfig, ProviderConfig, ServiceDiscovery, ServiceInstance};
use actix_zookeeper::prelude::*;
use actix_zookeeper::testkit::TestZooKeeper;
use support::check;

/// The instances' session timeout: a killed instance is gone this long (and a little) after.
const INSTANCE_SESSION_TIMEOUT: Duration = Duration::from_secs(2);

fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let [flag, connect, base, id, port] = args.as_slice() {
        if flag == "--instance" {
            return instance(connect, base, id, port.parse()?);
        }
    }
    let zk = TestZooKeeper::from_env()?;
    let connect = zk.connect_string();
    let base = format!("/examples/discovery-{}/services", std::process::id());
    println!("ZooKeeper is at {connect}; services live under {base}.");

    let mut instances = Vec::new();
    for (id, port) in [("greeter-1", 7001), ("greeter-2", 7002), ("greeter-3", 7003)] {
        instances.push((id, start_instance(&connect, &base, id, port)?));
        println!("  {id}: registered at 127.0.0.1:{port} (process {})", instances.last().map_or(0, |(_, c)| c.id()));
    }

    actix::System::new().block_on(async move {
        let session = SessionHandle::start(SessionConfig::new(&connect))?;
        let discovery = ServiceDiscovery::new(session.clone(), DiscoveryConfig::new(base.as_str()))?;
        let provider = discovery.provider("greeter", ProviderConfig::new()).await?;

        println!("The client picks an instance for each of six calls (round robin):");
        let mut picks = Vec::new();
        for _ in 0..6 {
            let picked = provider.get_instance().await?.ok_or("no instance to pick")?;
            let address = picked.address.as_deref().unwrap_or("?");
            println!("  call goes to {} at {address}:{}", picked.id, picked.port.unwrap_or(0));
            picks.push(picked.id);
        }
        check(
            picks == ["greeter-1", "greeter-2", "greeter-3", "greeter-1", "greeter-2", "greeter-3"],
            "each instance in turn",
        )?;

        let (victim, mut process) = instances.remove(1);
        process.kill()?;
        process.wait()?;
        let killed = Instant::now();
        println!("{victim}'s process is killed; its session ends when the server expires it.");
        while provider.all_instances().await?.iter().any(|i| i.id == victim) {
            if killed.elapsed() > Duration::from_secs(60) {
                return Err(format!("{victim} was still picked a minute after its process was killed").into());
            }
            actix_rt::time::sleep(Duration::from_millis(50)).await;
        }
        println!("  {victim} is gone from the picks {:.1} s after the kill.", killed.elapsed().as_secs_f64());
        check(killed.elapsed() >= INSTANCE_SESSION_TIMEOUT / 2, "not before the server expired its session")?;

        let mut after = Vec::new();
        for _ in 0..4 {
            let picked = provider.get_instance().await?.ok_or("no instance to pick")?;
            println!("  call goes to {}", picked.id);
            after.push(picked.id);
        }
        check(after.iter().all(|id| id != victim), "the killed instance is never picked again")?;
        check(after[0] != after[1] && after[0] == after[2] && after[1] == after[3], "the other two take turns")?;

        println!("The other two stop cleanly (they unregister).");
        for (id, mut process) in instances {
            drop(process.stdin.take());
            let status = process.wait()?;
            check(status.success(), &format!("{id} exited cleanly"))?;
        }
        // Their deletions reach the client's cache a round trip later.
        let stopped = Instant::now();
        while !provider.all_instances().await?.is_empty() && stopped.elapsed() < Duration::from_secs(10) {
            actix_rt::time::sleep(Duration::from_millis(20)).await;
        }
        check(provider.get_instance().await?.is_none(), "nothing is left to pick")?;
        provider.stop().await;
        session.close().await;
        Ok(())
    })
}

/// Starts this example again as instance `id`, and waits for its "registered" line.
fn start_instance(connect: &str, base: &str, id: &str, port: u16) -> Result<Child, Box<dyn Error>> {
    let mut child = Command::new(std::env::current_exe()?)
        .args(["--instance", connect, base, id, &port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()?;
    let mut line = String::new();
    BufReader::new(child.stdout.take().ok_or("no stdout")?).read_line(&mut line)?;
    if line.trim() != "registered" {
        let _ = child.kill();
        return Err(format!("{id} did not register: {line:?}").into());
    }
    Ok(child)
}

/// One instance: registers, says so, and stays registered until its stdin closes.
fn instance(connect: &str, base: &str, id: &str, port: u16) -> Result<(), Box<dyn Error>> {
    actix::System::new().block_on(async move {
        let config = SessionConfig::new(connect).with_session_timeout(INSTANCE_SESSION_TIMEOUT);
        let session = SessionHandle::start(config)?;
        let discovery = ServiceDiscovery::new(session.clone(), DiscoveryConfig::new(base))?;
        let me = ServiceInstance::new("greeter", id).with_address("127.0.0.1").with_port(port);
        let registration = discovery.register(me).await?;
        println!("registered");
        std::io::stdout().flush()?;
        actix_rt::task::spawn_blocking(|| std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink())).await??;
        registration.unregister().await.expect("unregistered");
        session.close().await;
        Ok(())
    })
}
