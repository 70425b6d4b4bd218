//! The running nginx: started from a [`Config`] in a fresh prefix, told
//! things by signal (reload, binary upgrade), and stopped.

use std::fs;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::{free_port, Config};
use crate::memcheck;

/// A running nginx.
pub struct Nginx {
    pub(super) prefix: PathBuf,
    /// The master started by a binary upgrade: not our child, found by its
    /// pid file, stopped by signal.
    adopted: Option<libc::pid_t>,
    /// Run under a wrapper (slower to start and stop).
    wrapped: bool,
    child: Option<Child>,
    port: u16,
    pub(super) checked: bool,
    /// The valgrind memcheck log, when run under memcheck.
    pub(super) memcheck: Option<PathBuf>,
}

impl Nginx {
    /// Starts nginx and waits until it accepts on its port.
    pub fn start(config: &Config) -> Nginx {
        let prefix = fresh_prefix(config.flavor.name);
        let port = free_port();
        // GENERATION_RETRY_VALGRIND: a foreground nginx not already under
        // a wrapper runs under memcheck, as one process.
        let memcheck = memcheck::log_dir()
            .filter(|_| config.wrapper.is_empty() && !config.daemon)
            .map(|dir| {
                fs::create_dir_all(&dir).expect("memcheck log directory");
                let name = prefix.file_name().expect("prefix name").to_string_lossy();
                dir.join(format!("{name}.log"))
            });
        let memcheck_config;
        let config = match &memcheck {
            Some(log) => {
                let command = memcheck::command(log);
                let command: Vec<&str> = command.iter().map(String::as_str).collect();
                memcheck_config = config.clone().wrapped(&command);
                &memcheck_config
            }
            None => config,
        };
        let conf = prefix.join("nginx.conf");
        fs::write(&conf, config.render(&prefix, port)).unwrap();
        let mut cmd = match config.wrapper.split_first() {
            Some((program, args)) => {
                let mut c = Command::new(program);
                c.args(args).arg(&config.flavor.binary);
                c
            }
            None => Command::new(&config.flavor.binary),
        };
        // If the harness dies without running Drop (killed), take nginx
        // with it: the kernel sends SIGTERM (nginx's fast shutdown) to the
        // master when the thread that started it is gone. Its own process
        // group lets `stop` take every process it left (Tengine's master
        // leaves a spinning child behind when a worker crashed).
        // SAFETY: prctl(2) and setpgid(2) are async-signal-safe, as
        // pre_exec requires.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                libc::setpgid(0, 0);
                Ok(())
            });
        }
        let child = cmd
            .arg("-p")
            .arg(&prefix)
            .arg("-c")
            .arg(&conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn nginx");
        let mut child = child;
        let mut adopted = None;
        if config.daemon {
            // The launcher forks the daemon and exits; the master is then
            // found by its pid file.
            let status = child.wait().expect("nginx launcher");
            assert!(status.success(), "nginx failed to daemonize: {status}");
            let deadline = Instant::now() + Duration::from_secs(10);
            adopted = loop {
                let pid = fs::read_to_string(prefix.join("logs/nginx.pid"))
                    .ok()
                    .and_then(|p| p.trim().parse::<libc::pid_t>().ok());
                if pid.is_some() {
                    break pid;
                }
                assert!(Instant::now() < deadline, "no nginx.pid after daemonizing");
                pause(Duration::from_millis(10));
            };
        }
        let mut nginx = Nginx {
            prefix,
            adopted,
            wrapped: !config.wrapper.is_empty(),
            child: if config.daemon { None } else { Some(child) },
            port,
            checked: false,
            memcheck,
        };
        let startup = if config.wrapper.is_empty() { 10 } else { 120 };
        nginx.wait_accepting(Duration::from_secs(startup));
        nginx
    }

    fn wait_accepting(&mut self, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let addr = self.addr();
        loop {
            if let Ok(s) = TcpStream::connect_timeout(&addr, Duration::from_millis(100)) {
                // A connect to a port nobody listens on yet can succeed
                // with the socket connected to itself (the kernel picked
                // the same port as the source): not nginx. Under a wrapper
                // nginx starts slowly, which leaves time for that.
                let itself = s.local_addr().ok() == s.peer_addr().ok();
                // Under a wrapper, also wait for the notices nginx logs
                // once its configuration is loaded, just before it serves.
                let started = !self.wrapped || self.error_log().contains("getrlimit(");
                if !itself && started {
                    return;
                }
            }
            let Some(child) = self.child.as_mut() else {
                assert!(
                    Instant::now() < deadline,
                    "nginx did not accept on {addr} within {timeout:?}:\n{}",
                    self.error_log()
                );
                pause(Duration::from_millis(10));
                continue;
            };
            if let Ok(Some(status)) = child.try_wait() {
                let mut stderr = String::new();
                if let Some(mut e) = child.stderr.take() {
                    use std::io::Read;
                    let _ = e.read_to_string(&mut stderr);
                }
                self.checked = true;
                panic!(
                    "nginx exited at start ({status}):\n{stderr}\n{}",
                    self.error_log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "nginx did not accept on {addr} within {timeout:?}:\n{}",
                self.error_log()
            );
            pause(Duration::from_millis(10));
        }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    pub fn prefix(&self) -> &Path {
        &self.prefix
    }

    /// `nginx -T` of the running `config`, as an operator would pass it
    /// to `generation-retry-diagnose --nginx-conf`.
    pub fn dump(&self, config: &Config) -> String {
        let out = Command::new(&config.flavor.binary)
            .arg("-T")
            .arg("-p")
            .arg(&self.prefix)
            .arg("-c")
            .arg(self.prefix.join("nginx.conf"))
            .output()
            .expect("run nginx -T");
        assert!(
            out.status.success(),
            "nginx -T failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).expect("nginx -T prints text")
    }

    /// The master's pid.
    pub fn pid(&self) -> libc::pid_t {
        match (self.adopted, &self.child) {
            (Some(pid), _) => pid,
            (None, Some(c)) => c.id() as libc::pid_t,
            (None, None) => 0,
        }
    }

    fn pid_file(&self) -> Option<libc::pid_t> {
        fs::read_to_string(self.prefix.join("logs/nginx.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Binary upgrade, as operators do it: USR2 to the master (it starts a
    /// new master from the binary, handing over the listening sockets),
    /// then QUIT to the old master once the new one runs. Returns when the
    /// old master has exited; the new master is stopped on drop. Bounded:
    /// 20 s for the new master, nginx's `client_header_timeout` and a margin
    /// for the old one's exit.
    pub async fn binary_upgrade(&mut self) {
        let old = self.pid();
        let workers = || self.error_log().matches("start worker process").count();
        let before = workers();
        self.signal(libc::SIGUSR2);
        let deadline = Instant::now() + Duration::from_secs(20);
        let new = loop {
            match self.pid_file() {
                // The new master wrote its pid file and started a worker.
                Some(pid) if pid != old && workers() > before => break pid,
                _ => {}
            }
            assert!(
                Instant::now() < deadline,
                "no new master after USR2:\n{}",
                self.error_log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        kill(old, libc::SIGQUIT);
        // A graceful exit waits for every connection but the idle ones, and
        // one a client opened and has sent nothing on yet is not idle to
        // nginx: hyper's pool and Go's (Prometheus's) race a new connect
        // against a connection coming free, and keep the loser unused. nginx
        // closes it at `client_header_timeout` (60 s): the bound. Seen in a
        // clean-clone run under load: the old worker exited 30 s after QUIT.
        let deadline = Instant::now() + Duration::from_secs(70);
        while alive(old) {
            assert!(
                Instant::now() < deadline,
                "old master did not exit within client_header_timeout:\n{}",
                self.error_log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        self.adopted = Some(new);
    }

    /// Sends a signal to the master.
    pub fn signal(&self, sig: libc::c_int) {
        let pid = self.pid();
        if pid > 0 {
            kill(pid, sig);
        }
    }

    /// Reloads the configuration (SIGHUP) and waits until the new cycle's
    /// worker has started and the old one has exited (it keeps serving the
    /// connections it had, with the old cycle's peer list, until then; the
    /// caller must drop its keepalive connections for it to go). Bounded.
    /// Writes `config` as nginx.conf (same prefix and port), then reloads.
    pub fn reconfigure(&self, config: &Config) {
        fs::write(
            self.prefix.join("nginx.conf"),
            config.render(&self.prefix, self.port),
        )
        .expect("write nginx.conf");
        self.reload();
    }

    /// `nginx -t` of `config` (same prefix and port), written beside
    /// nginx.conf as `test.conf`, as an operator checks a configuration
    /// before the reload.
    pub fn test_config(&self, config: &Config) -> super::ConfigTest {
        super::config::run_test(config, &[], &self.prefix, self.port, "test.conf")
    }

    /// [`Nginx::reconfigure`], then one request answered (on a connection
    /// of its own, closed after): with one worker, proof that the new
    /// worker has run its `init_process`, where the module records the
    /// worker's configuration. A reload that comes before that finds the
    /// worker unrecorded and frees nothing (a loaded CI machine did it
    /// between two back-to-back reloads).
    pub fn reconfigure_served(&self, config: &Config) {
        self.reconfigure(config);
        let mut c = TcpStream::connect(self.addr()).expect("connect to nginx");
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        c.write_all(b"GET / HTTP/1.0\r\nHost: t\r\n\r\n")
            .expect("send");
        let mut answer = String::new();
        let _ = c.read_to_string(&mut answer);
        assert!(
            answer.starts_with("HTTP/1."),
            "no answer after the reload: {answer:?}"
        );
    }

    /// Writes `config` as nginx.conf and reloads, waiting only until the
    /// new cycle's worker has started: old workers may go on draining.
    pub fn reconfigure_while_draining(&self, config: &Config) {
        fs::write(
            self.prefix.join("nginx.conf"),
            config.render(&self.prefix, self.port),
        )
        .expect("write nginx.conf");
        let started = self.error_log().matches("start worker process").count();
        self.signal(libc::SIGHUP);
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.error_log().matches("start worker process").count() <= started {
            assert!(
                Instant::now() < deadline,
                "no new worker after the reload:\n{}",
                self.error_log()
            );
            pause(Duration::from_millis(10));
        }
    }

    /// Writes `config` as nginx.conf and reloads, for a reload that must
    /// fail: waits until the error log says `failure` (the running
    /// configuration goes on).
    pub fn reconfigure_failing(&self, config: &Config, failure: &str) {
        fs::write(
            self.prefix.join("nginx.conf"),
            config.render(&self.prefix, self.port),
        )
        .expect("write nginx.conf");
        let before = self.error_log().matches(failure).count();
        self.signal(libc::SIGHUP);
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.error_log().matches(failure).count() <= before {
            assert!(
                Instant::now() < deadline,
                "the reload did not fail with {failure:?}:\n{}",
                self.error_log()
            );
            pause(Duration::from_millis(10));
        }
    }

    pub fn reload(&self) {
        let count = |needle: &str| self.error_log().matches(needle).count();
        let (started, exited) = (count("start worker process"), count("exited with code"));
        self.signal(libc::SIGHUP);
        let deadline = Instant::now() + Duration::from_secs(20);
        while count("start worker process") <= started || count("exited with code") <= exited {
            assert!(
                Instant::now() < deadline,
                "reload did not complete:\n{}",
                self.error_log()
            );
            pause(Duration::from_millis(10));
        }
    }

    pub(super) fn stop(&mut self) {
        if let Some(pid) = self.adopted.take() {
            kill(pid, libc::SIGQUIT);
            let deadline = Instant::now() + Duration::from_secs(10);
            while alive(pid) && Instant::now() < deadline {
                pause(Duration::from_millis(20));
            }
            if alive(pid) {
                kill(pid, libc::SIGKILL);
            }
        }
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = child.id() as libc::pid_t;
        kill(pid, libc::SIGQUIT);
        let grace = if self.wrapped { 60 } else { 10 };
        let deadline = Instant::now() + Duration::from_secs(grace);
        let mut exited = false;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                exited = true;
                break;
            }
            pause(Duration::from_millis(20));
        }
        if !exited {
            let _ = child.kill();
            let _ = child.wait();
        }
        // Whatever the master left in its process group (its own, see
        // `start`) goes with it: no process outlives the test.
        kill(-pid, libc::SIGKILL);
    }
}

/// A fresh directory for one nginx, removed on drop unless the test failed.
pub(super) fn fresh_prefix(tag: &str) -> PathBuf {
    static SEQ: AtomicU32 = AtomicU32::new(0);
    let dir = std::env::temp_dir().join(format!(
        "generation-retry-t/{tag}-{}-{}",
        std::process::id(),
        SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("logs")).expect("create nginx prefix");
    dir
}

/// Sends `sig` to process `pid` (a master this harness started or adopted).
pub(crate) fn kill(pid: libc::pid_t, sig: libc::c_int) {
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe { libc::kill(pid, sig) };
}

/// Whether process `pid` still exists (signal 0 only asks).
fn alive(pid: libc::pid_t) -> bool {
    // SAFETY: as in `kill`.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Waits `d` in the synchronous parts of the harness (start, reload, stop),
/// which async tests call: inside a multi-threaded tokio runtime the wait
/// hands this worker's other tasks (the DNS server, the backend, a load) to
/// the other workers first, so they keep running while nginx is waited for.
pub(super) fn pause(d: Duration) {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        // Not while unwinding: the runtime may be going down with the test.
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread && !std::thread::panicking() => {
            tokio::task::block_in_place(|| std::thread::sleep(d))
        }
        _ => std::thread::sleep(d),
    }
}
