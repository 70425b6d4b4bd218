//! The bench's command line: the cost bench's knobs, and `--churn`'s.

use std::path::PathBuf;
use std::time::Duration;

use generation_retry_t::actors::backend::Wire;
use generation_retry_t::scenarios::churn;

pub struct Args {
    pub rounds: usize,
    pub duration: Duration,
    pub rate: f64,
    pub connections: usize,
    pub races: usize,
    pub callgrind_requests: usize,
    pub out: Option<PathBuf>,
    /// `--churn`: the churn bench instead (`churn::Options`, one run per
    /// count of upstreams and variant).
    pub churn: Option<ChurnArgs>,
}

pub struct ChurnArgs {
    pub upstreams: Vec<usize>,
    /// `--protocols`: the protocols to run it through (HTTP alone unless
    /// given; `all` is every one nginx's http upstream speaks).
    pub wires: Vec<Wire>,
    pub opts: churn::Options,
}

pub fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        rounds: 5,
        duration: Duration::from_secs(5),
        rate: 1000.0,
        connections: 32,
        races: 10,
        callgrind_requests: 2000,
        out: None,
        churn: None,
    };
    let mut churn_on = false;
    let mut upstreams = vec![40, 1000];
    let mut wires = vec![Wire::Http];
    let mut c = churn::Options::default();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |n: &str| it.next().ok_or(format!("{n} needs a value"));
        let int = |v: String, n: &str| {
            v.parse::<usize>()
                .map_err(|_| format!("{n}: bad number `{v}`"))
        };
        match arg.as_str() {
            "--rounds" => a.rounds = int(value("--rounds")?, "--rounds")?.max(1),
            "--duration" => {
                a.duration =
                    Duration::from_secs(int(value("--duration")?, "--duration")?.max(1) as u64)
            }
            "--rate" => a.rate = int(value("--rate")?, "--rate")?.max(1) as f64,
            "--connections" => {
                a.connections = int(value("--connections")?, "--connections")?.max(1)
            }
            "--races" => a.races = int(value("--races")?, "--races")?,
            "--callgrind-requests" => {
                a.callgrind_requests = int(value("--callgrind-requests")?, "--callgrind-requests")?
            }
            "--out" => a.out = Some(PathBuf::from(value("--out")?)),
            "--churn" => churn_on = true,
            "--upstreams" => {
                upstreams = value("--upstreams")?
                    .split(',')
                    .map(|n| int(n.trim().to_string(), "--upstreams").map(|n| n.max(1)))
                    .collect::<Result<_, _>>()?
            }
            "--protocols" => wires = parse_wires(&value("--protocols")?)?,
            "--requests" => c.requests = int(value("--requests")?, "--requests")?.max(1),
            "--workers" => c.workers = int(value("--workers")?, "--workers")?.max(1) as u32,
            "--reclaim" => {
                let v = value("--reclaim")?;
                c.reclaim = v
                    .parse::<f64>()
                    .ok()
                    .filter(|p| (0.0..=1.0).contains(p))
                    .ok_or(format!("--reclaim: expected a probability, got `{v}`"))?
            }
            _ => {
                return Err(
                    "cargo xtask bench [--rounds N] [--duration S] [--rate RPS] \
                            [--connections C] [--races N] [--callgrind-requests N] [--out DIR]\n\
                     cargo xtask bench --churn [--upstreams N,M] [--requests N] [--rounds N] \
                            [--connections C] [--workers W] [--reclaim P] [--out DIR] \
                            [--protocols all|proxy,fastcgi,uwsgi,scgi,memcached,grpc,http2]"
                        .into(),
                )
            }
        }
    }
    if churn_on {
        let given = |o: &str| std::env::args().any(|x| x == o);
        if given("--connections") {
            c.connections = a.connections;
        }
        if !given("--rounds") {
            a.rounds = 3;
        }
        a.churn = Some(ChurnArgs {
            upstreams,
            wires,
            opts: c,
        });
    }
    Ok(a)
}

/// `all`, or protocols by their directive's prefix (`proxy`, `fastcgi`,
/// ...), comma-separated.
fn parse_wires(v: &str) -> Result<Vec<Wire>, String> {
    if v == "all" {
        return Ok(Wire::ALL.to_vec());
    }
    v.split(',')
        .map(|name| {
            Wire::ALL
                .into_iter()
                .find(|w| w.name() == name.trim())
                .ok_or_else(|| {
                    let known: Vec<&str> = Wire::ALL.iter().map(|w| w.name()).collect();
                    format!(
                        "--protocols: unknown `{name}`; expected all or {}",
                        known.join(",")
                    )
                })
        })
        .collect()
}
