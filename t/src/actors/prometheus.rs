//! The real Prometheus, as an operator runs it: Debian's `prometheus`
//! package (2.42 in Debian 12) ships the server and `promtool`. [`Server`]
//! starts the server on a free loopback port with a configuration and a
//! TSDB of its own (a temporary directory), waits until it is ready,
//! queries its HTTP API and stops it on drop; [`promtool`] runs the tool.
//! Nothing stands in for either: without them, the tests that need them
//! fail and say what to install.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::nginx::free_port;

/// `contrib/REL`: the rules and the dashboard an operator deploys.
pub fn contrib(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../contrib")
        .join(rel)
}

/// The file `rel` of the repository (docs, ...), as text.
pub fn repository_file(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(rel);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// `program` on the `PATH`; fails the test, saying what to install, when
/// it is not there (CI installs it from `ci/packages.txt`).
pub fn program(program: &str) -> PathBuf {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
        .unwrap_or_else(|| {
            panic!(
                "`{program}` is not installed: install Debian's `prometheus` package \
                 (`apt-get install prometheus`; it ships `prometheus` and `promtool`, and \
                 ci/packages.txt lists it, so .ci/run and `cargo xtask build` install it)"
            )
        })
}

/// What `promtool` said.
#[derive(Debug)]
pub struct Said {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `promtool ARGS`, with `stdin` on its standard input.
pub fn promtool(args: &[&str], stdin: &str) -> Said {
    use std::io::Write;
    let mut child = Command::new(program("promtool"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn promtool");
    let mut input = child.stdin.take().expect("promtool stdin");
    let text = stdin.to_string();
    // Written from a thread: promtool may answer before reading it all.
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(text.as_bytes());
    });
    let out = child.wait_with_output().expect("run promtool");
    let _ = writer.join();
    Said {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// One series of a query's answer: its labels, and its samples as
/// `(unix seconds, value)` (one for an instant vector, every sample in the
/// range for a range vector).
#[derive(Clone, Debug)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub samples: Vec<(f64, f64)>,
}

impl Series {
    /// The label's value ("" when absent, as PromQL treats it).
    pub fn label(&self, name: &str) -> &str {
        self.labels.get(name).map(String::as_str).unwrap_or("")
    }

    /// The (last) value.
    pub fn value(&self) -> f64 {
        self.samples.last().map(|s| s.1).unwrap_or(f64::NAN)
    }
}

/// A running Prometheus server.
pub struct Server {
    child: Option<Child>,
    dir: PathBuf,
    port: u16,
    http: reqwest::Client,
}

impl Server {
    /// Starts `prometheus` with `config` (prometheus.yml's text) on a free
    /// loopback port, its TSDB in a fresh directory, and waits (bounded)
    /// until `/-/ready` answers 200.
    pub async fn start(config: &str) -> Server {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let binary = program("prometheus");
        let dir = std::env::temp_dir().join(format!(
            "generation-retry-t/prometheus-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("data")).expect("create the prometheus directory");
        fs::write(dir.join("prometheus.yml"), config).expect("write prometheus.yml");
        let log = fs::File::create(dir.join("prometheus.log")).expect("prometheus.log");
        let port = free_port();
        let mut cmd = Command::new(binary);
        // If the harness dies without running Drop, take the server with
        // it (as nginx is, see `Nginx::start`).
        // SAFETY: prctl(2) is async-signal-safe, as pre_exec requires.
        unsafe {
            use std::os::unix::process::CommandExt;
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        let child = cmd
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=info")
            .current_dir(&dir)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("prometheus.log"))
            .stderr(log)
            .spawn()
            .expect("spawn prometheus");
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .build()
            .expect("reqwest client");
        let mut server = Server {
            child: Some(child),
            dir,
            port,
            http,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let ready = server
                .http
                .get(server.url("/-/ready"))
                .send()
                .await
                .map(|r| r.status().as_u16() == 200)
                .unwrap_or(false);
            if ready {
                return server;
            }
            if let Some(Ok(Some(status))) = server.child.as_mut().map(|c| c.try_wait()) {
                panic!("prometheus exited at start ({status}):\n{}", server.log());
            }
            assert!(
                Instant::now() < deadline,
                "prometheus not ready within 30 s:\n{}",
                server.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `http://127.0.0.1:PORT{path}`
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// What the server logged.
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join("prometheus.log")).unwrap_or_default()
    }

    /// GET `path` of the HTTP API with `params`; the `data` of a
    /// `"status":"success"` answer, or what went wrong.
    pub async fn api(&self, path: &str, params: &[(&str, &str)]) -> Result<Value, String> {
        let url = reqwest::Url::parse_with_params(&self.url(path), params)
            .map_err(|e| format!("{path}: {e}"))?;
        let r = self
            .http
            .get(url)
            .send()
            .await
            .map_err(|e| format!("{path} {params:?}: {e}"))?;
        let status = r.status().as_u16();
        let body = r.text().await.map_err(|e| format!("{path}: {e}"))?;
        let v: Value = serde_json::from_str(&body).map_err(|e| format!("{path}: {e}: {body}"))?;
        if v["status"] != "success" {
            return Err(format!(
                "{path} {params:?}: HTTP {status}, {}: {}",
                v["errorType"], v["error"]
            ));
        }
        Ok(v["data"].clone())
    }

    /// An instant query (`/api/v1/query`) at `time` (unix seconds; now
    /// when `None`): its series, or the server's error (a parse error,
    /// say). A scalar or string answer is one series without labels.
    pub async fn query(&self, expr: &str, time: Option<f64>) -> Result<Vec<Series>, String> {
        let time = time.map(|t| format!("{t:.3}"));
        let mut params = vec![("query", expr)];
        if let Some(t) = &time {
            params.push(("time", t));
        }
        let data = self.api("/api/v1/query", &params).await?;
        parse_result(&data).map_err(|e| format!("{expr}: {e}"))
    }

    /// [`Server::query`], which must succeed.
    pub async fn must(&self, expr: &str, time: Option<f64>) -> Vec<Series> {
        self.query(expr, time)
            .await
            .unwrap_or_else(|e| panic!("{e}\n{}", self.log()))
    }

    /// Queries `expr` (now) until `done` holds for its answer; panics,
    /// naming `what` and the last answer, after `timeout`.
    pub async fn wait_for(
        &self,
        what: &str,
        expr: &str,
        timeout: Duration,
        done: impl Fn(&[Series]) -> bool,
    ) -> Vec<Series> {
        let deadline = Instant::now() + timeout;
        loop {
            let answer = self.must(expr, None).await;
            if done(&answer) {
                return answer;
            }
            assert!(
                Instant::now() < deadline,
                "Prometheus: {what} not within {timeout:?}; {expr} gave {answer:#?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        crate::nginx::kill(child.id() as libc::pid_t, libc::SIGTERM);
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        if std::thread::panicking() {
            eprintln!(
                "prometheus directory kept for inspection: {}",
                self.dir.display()
            );
            return;
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// The `data` of a query answer as series.
fn parse_result(data: &Value) -> Result<Vec<Series>, String> {
    let sample = |p: &Value| -> Result<(f64, f64), String> {
        let t = p[0].as_f64().ok_or_else(|| format!("no time in {p}"))?;
        let v = p[1].as_str().ok_or_else(|| format!("no value in {p}"))?;
        let v = match v {
            "NaN" => f64::NAN,
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            v => v.parse().map_err(|e| format!("value {v:?}: {e}"))?,
        };
        Ok((t, v))
    };
    let labels = |m: &Value| -> BTreeMap<String, String> {
        m.as_object()
            .map(|o| {
                o.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
                    .collect()
            })
            .unwrap_or_default()
    };
    let result = &data["result"];
    match data["resultType"].as_str() {
        Some("vector") => result
            .as_array()
            .ok_or("no result")?
            .iter()
            .map(|s| {
                Ok(Series {
                    labels: labels(&s["metric"]),
                    samples: vec![sample(&s["value"])?],
                })
            })
            .collect(),
        Some("matrix") => result
            .as_array()
            .ok_or("no result")?
            .iter()
            .map(|s| {
                Ok(Series {
                    labels: labels(&s["metric"]),
                    samples: s["values"]
                        .as_array()
                        .ok_or("no values")?
                        .iter()
                        .map(sample)
                        .collect::<Result<_, _>>()?,
                })
            })
            .collect(),
        Some("scalar") => Ok(vec![Series {
            labels: BTreeMap::new(),
            samples: vec![sample(result)?],
        }]),
        other => Err(format!("result type {other:?}: {data}")),
    }
}
