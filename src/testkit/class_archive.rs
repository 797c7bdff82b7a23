//! A class-data-sharing archive of a starting ZooKeeper server's classes, made once per machine,
//! so that each test server maps those classes instead of loading and verifying them again.
//! Measured on a 2-core machine: a server start takes ~0.30 CPU-seconds instead of ~0.45, and
//! serves after ~0.22 s instead of ~0.31; a test run starts a few hundred servers.
//!
//! Owns: where the archive lives (the temp dir, named for the classpath and the JVM), making it
//! (a throwaway standalone server run with `-XX:ArchiveClassesAtExit`, stopped gracefully once it
//! serves, which is when the JVM writes the archive) and the JVM flag that uses it. Does not own
//! any server a test uses. Without an archive (a JVM without dynamic archives, a failed run, a
//! temp dir that cannot be written) servers start as before, and a JVM that finds the archive
//! stale ignores it (`-Xshare:auto`, its default).

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::classpath;
use super::four_letter::{has_mode, srvr};
use super::launch::{
    FAST_STARTUP_FLAG, JVM_FLAGS, STANDALONE_MAIN, common_config, free_ports, fresh_temp_dir_in, spawn_command,
    write_file,
};

/// How long the throwaway server may take to serve, and then to write the archive and exit.
const DUMP_TIMEOUT: Duration = Duration::from_secs(30);

/// `-XX:SharedArchiveFile=…` for a test server's JVM, or `None` when there is no archive. The
/// first call in a process makes the archive if no earlier process has (about a second).
pub(crate) fn jvm_flag() -> Option<&'static str> {
    static FLAG: OnceLock<Option<String>> = OnceLock::new();
    FLAG.get_or_init(|| {
        let archive = archive_path()?;
        if !archive.is_file() {
            if let Err(why) = dump(&archive) {
                tracing::info!(%why, "no class-data-sharing archive; test servers start without one");
                return None;
            }
        }
        Some(format!("-XX:SharedArchiveFile={}", archive.display()))
    })
    .as_deref()
}

/// The archive's path: one per classpath (and its jars' versions) and JVM.
fn archive_path() -> Option<PathBuf> {
    let classpath = classpath().ok()?;
    let mut hasher = DefaultHasher::new();
    classpath.hash(&mut hasher);
    for jar in classpath.split(':') {
        std::fs::metadata(jar).and_then(|m| m.modified()).ok().hash(&mut hasher);
    }
    std::env::var_os("JAVA_HOME").hash(&mut hasher);
    let java = std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("java"))
        .find(|java| java.is_file())
        .and_then(|java| std::fs::canonicalize(java).ok());
    java.as_ref().and_then(|java| std::fs::metadata(java).and_then(|m| m.modified()).ok()).hash(&mut hasher);
    java.hash(&mut hasher);
    Some(std::env::temp_dir().join(format!("actix-zookeeper-server-classes-{:016x}.jsa", hasher.finish())))
}

/// Runs a throwaway server until it serves, stops it gracefully so the JVM writes the classes it
/// loaded to a file of its own, and renames that into place (so another test process never maps
/// a half-written archive).
fn dump(archive: &std::path::Path) -> Result<(), String> {
    let dir = fresh_temp_dir_in(None).map_err(|e| e.to_string())?;
    let result = dump_in(&dir, archive);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn dump_in(dir: &std::path::Path, archive: &std::path::Path) -> Result<(), String> {
    let port = free_ports(1).map_err(|e| e.to_string())?[0];
    let cfg = dir.join("zoo.cfg");
    write_file(&cfg, &common_config(&dir.join("data"), port)).map_err(|e| e.to_string())?;
    let staging = PathBuf::from(format!("{}.{}.tmp", archive.display(), std::process::id()));
    let mut command = Command::new("java");
    command
        .arg(FAST_STARTUP_FLAG)
        .args(JVM_FLAGS)
        .arg(format!("-XX:ArchiveClassesAtExit={}", staging.display()))
        .arg("-cp")
        .arg(classpath().map_err(|e| e.to_string())?)
        .arg(STANDALONE_MAIN)
        .arg(&cfg)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = spawn_command(command).map_err(|e| format!("spawn java: {e}"))?;
    let deadline = Instant::now() + DUMP_TIMEOUT;
    let addr = format!("127.0.0.1:{port}");
    let exited = loop {
        if let Ok(Some(status)) = child.try_wait() {
            break Err(format!("the server exited before serving ({status})"));
        }
        if srvr(&addr).is_ok_and(|answer| has_mode(&answer)) {
            // SIGTERM: a graceful exit is when the JVM writes the archive.
            // SAFETY: kill(2) on our own child's pid; no memory is touched.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
            break loop {
                match child.try_wait() {
                    Ok(Some(_)) => break Ok(()),
                    Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
                    _ => break Err("the server did not exit after SIGTERM".to_owned()),
                }
            };
        }
        if Instant::now() >= deadline {
            break Err(format!("the server did not serve within {DUMP_TIMEOUT:?}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if exited.is_err() {
        let _ = child.kill();
        let _ = child.wait();
        let _ = std::fs::remove_file(&staging);
    }
    exited?;
    if !staging.is_file() {
        return Err("the JVM wrote no archive (dynamic archives need JDK 13 or later)".to_owned());
    }
    std::fs::rename(&staging, archive).map_err(|e| {
        let _ = std::fs::remove_file(&staging);
        format!("moving {} into place: {e}", staging.display())
    })
}
