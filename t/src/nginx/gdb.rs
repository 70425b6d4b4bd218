//! Stops one nginx worker at a function, for as long as a test needs, with
//! gdb: how a test holds a worker between two steps of one selection while
//! another worker changes the shared peer list (a window nginx otherwise
//! leaves open for microseconds, so it cannot be hit by timing).
//!
//! gdb attaches to the running worker, sets a breakpoint, lets it run, and
//! reports when the breakpoint is hit; the worker then stays stopped until
//! [`Stopped::release`] deletes the breakpoint and detaches. Needs gdb
//! (`ci/packages.txt`) and ptrace rights over the worker (root, or the
//! worker's owner with `kernel.yama.ptrace_scope` 0).

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::memcheck::patience;
use crate::nginx::Nginx;

/// The workers' pids, in nginx's order (worker 0 first), once the master
/// has logged `n` of them (it logs each as it starts it, which may be after
/// nginx accepts). Bounded: 10 s, more under memcheck.
pub async fn worker_pids(nginx: &Nginx, n: usize) -> Vec<libc::pid_t> {
    let deadline = Instant::now() + patience(Duration::from_secs(10));
    loop {
        let pids: Vec<libc::pid_t> = nginx
            .error_log()
            .lines()
            .filter_map(|l| l.split("start worker process ").nth(1))
            .filter_map(|p| p.trim().parse().ok())
            .collect();
        if pids.len() >= n {
            return pids;
        }
        assert!(Instant::now() < deadline, "{}", nginx.error_log());
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// gdb attached to a worker, with a breakpoint set.
pub struct Breakpoint {
    child: Child,
    stdin: ChildStdin,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Everything gdb printed, for failure messages.
    transcript: String,
}

/// The worker stopped at the breakpoint.
pub struct Stopped(Breakpoint);

/// What gdb prints when the worker reaches the breakpoint.
const HIT: &str = "Breakpoint 1,";
/// A line gdb echoes once the commands before it ran.
const SYNC: &str = "generation-retry-gdb-sync";

impl Breakpoint {
    /// Attaches to `pid` and breaks at `function`, letting its first `skip`
    /// calls pass; the worker runs on once this returns.
    pub async fn attach(pid: libc::pid_t, function: &str, skip: u32) -> Result<Breakpoint, String> {
        let mut child = Command::new("gdb")
            .args(["-q", "-nx", "-p", &pid.to_string()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("gdb: {e} (install gdb: see ci/packages.txt)"))?;
        let stdin = child.stdin.take().expect("gdb stdin");
        let stdout = BufReader::new(child.stdout.take().expect("gdb stdout")).lines();
        let mut b = Breakpoint {
            child,
            stdin,
            stdout,
            transcript: String::new(),
        };
        // nginx's control signals go straight through: the tests send them
        // (a reload while gdb holds the master at a breakpoint) and gdb
        // would otherwise stop the process at each.
        b.send(&format!(
            "set pagination off\nset confirm off\n\
             handle SIGHUP SIGUSR1 SIGUSR2 SIGTERM SIGQUIT SIGWINCH nostop noprint pass\n\
             break {function}\nignore 1 {skip}\n"
        ))
        .await?;
        // Only once the breakpoint is in place may the worker run on.
        b.sync().await?;
        if !b.transcript.contains("Breakpoint 1 at") {
            return Err(format!(
                "gdb set no breakpoint at {function} in {pid}:\n{}",
                b.transcript
            ));
        }
        b.send("continue\n").await?;
        Ok(b)
    }

    /// Waits until the worker is stopped at the breakpoint.
    pub async fn hit(mut self, timeout: Duration) -> Result<Stopped, String> {
        match tokio::time::timeout(timeout, self.read_until(HIT)).await {
            Ok(Ok(())) => Ok(Stopped(self)),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(format!(
                "the worker did not reach the breakpoint within {timeout:?}:\n{}",
                self.transcript
            )),
        }
    }

    async fn send(&mut self, commands: &str) -> Result<(), String> {
        self.stdin
            .write_all(commands.as_bytes())
            .await
            .map_err(|e| format!("gdb stdin: {e}"))
    }

    /// Asks gdb to echo a line and reads up to it.
    async fn sync(&mut self) -> Result<(), String> {
        self.send(&format!("echo {SYNC}\\n\n")).await?;
        tokio::time::timeout(Duration::from_secs(30), self.read_until(SYNC))
            .await
            .map_err(|_| format!("gdb did not answer:\n{}", self.transcript))?
    }

    async fn read_until(&mut self, needle: &str) -> Result<(), String> {
        loop {
            match self.stdout.next_line().await {
                Ok(Some(line)) => {
                    self.transcript.push_str(&line);
                    self.transcript.push('\n');
                    if line.contains(needle) {
                        return Ok(());
                    }
                }
                Ok(None) => return Err(format!("gdb exited:\n{}", self.transcript)),
                Err(e) => return Err(format!("gdb stdout: {e}")),
            }
        }
    }
}

impl Stopped {
    /// Makes the stopped function return `value` at once (a fault injected
    /// where nginx's own code would fail, say an allocation), then
    /// [`Stopped::release`]s the worker.
    pub async fn release_returning(mut self, value: i64) -> Result<(), String> {
        self.0.send(&format!("return (long) {value}\n")).await?;
        self.0.sync().await?;
        if !self.0.transcript.contains("#0 ") {
            return Err(format!(
                "gdb did not return from the frame:\n{}",
                self.0.transcript
            ));
        }
        self.release().await
    }

    /// Lets the stopped function run to its return and stops the worker
    /// again there, in its caller.
    pub async fn finish(mut self) -> Result<Stopped, String> {
        self.0.send("finish\n").await?;
        // gdb reads the next command once the frame has returned.
        self.0.sync().await?;
        if !self.0.transcript.contains("Run till exit") {
            return Err(format!(
                "gdb did not run to the frame's return:\n{}",
                self.0.transcript
            ));
        }
        Ok(self)
    }

    /// Deletes the breakpoint and detaches: the worker runs on from where
    /// it stopped, as if nothing had happened.
    pub async fn release(mut self) -> Result<(), String> {
        let b = &mut self.0;
        b.send("delete\ndetach\n").await?;
        b.sync().await?;
        b.send("quit\n").await?;
        drop(b.stdin.shutdown().await);
        match tokio::time::timeout(Duration::from_secs(30), b.child.wait()).await {
            Ok(Ok(_)) => Ok(()),
            _ => Err(format!("gdb did not quit:\n{}", b.transcript)),
        }
    }
}
