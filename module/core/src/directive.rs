//! Arguments of `generation_retry_resnapshot on | off [max=N];`.

use std::fmt;

/// The directive's name.
pub const DIRECTIVE: &str = "generation_retry_resnapshot";

/// The status directive's name.
pub const STATUS_DIRECTIVE: &str = "generation_retry_status";

/// Re-snapshots allowed per peer selection when `max=` is not given.
///
/// One generation change is what a single re-resolve produces; a second one
/// can land while the first re-snapshot is being taken only if the resolver
/// answers twice within microseconds. Two covers that, and the bound stops a
/// pathological flapping list from spinning a worker.
pub const DEFAULT_MAX: u32 = 2;

/// The largest `max=` accepted. Each re-snapshot allocates a fresh balancer
/// state in the request pool, so the bound also bounds memory per request.
pub const MAX_MAX: u32 = 16;

/// What the directive asks of an upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Resnapshot {
    /// `on`: rescue generation-busy selections. `off`: observe and count only.
    pub enabled: bool,
    /// Re-snapshots allowed per peer selection.
    pub max: u32,
}

/// Why the arguments were refused. [`ArgError::message`] renders it the way
/// nginx words its own refusals; nginx appends ` in FILE:LINE`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgError {
    /// The first argument was neither `on` nor `off`.
    InvalidSwitch(String),
    /// A second argument that is not `max=N`.
    UnknownParameter(String),
    /// `max=` with something that is not a number in range.
    InvalidMax(String),
    /// Wrong number of arguments.
    Arity(usize),
}

impl ArgError {
    /// The `[emerg]` text for `directive`, in nginx's wording.
    pub fn message(&self, directive: &str) -> String {
        match self {
            ArgError::InvalidSwitch(v) => format!(
                "invalid value \"{v}\" in \"{directive}\" directive, it must be \"on\" or \"off\""
            ),
            ArgError::UnknownParameter(v) => {
                format!("invalid parameter \"{v}\" in \"{directive}\" directive")
            }
            ArgError::InvalidMax(v) => format!(
                "invalid value \"{v}\" in \"{directive}\" directive, max must be 1..{MAX_MAX}"
            ),
            ArgError::Arity(n) => format!(
                "invalid number of arguments in \"{directive}\" directive, 1 or 2 expected, {n} given"
            ),
        }
    }
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message(DIRECTIVE))
    }
}

impl std::error::Error for ArgError {}

/// Parses the directive's arguments (without the directive name).
pub fn parse_resnapshot<S: AsRef<[u8]>>(args: &[S]) -> Result<Resnapshot, ArgError> {
    let text = |s: &S| String::from_utf8_lossy(s.as_ref()).into_owned();

    let (switch, rest) = match args {
        [switch, rest @ ..] if rest.len() <= 1 => (switch, rest),
        _ => return Err(ArgError::Arity(args.len())),
    };

    let enabled = match switch.as_ref() {
        b"on" => true,
        b"off" => false,
        _ => return Err(ArgError::InvalidSwitch(text(switch))),
    };

    let mut max = DEFAULT_MAX;
    if let Some(param) = rest.first() {
        let value = param
            .as_ref()
            .strip_prefix(b"max=")
            .ok_or_else(|| ArgError::UnknownParameter(text(param)))?;
        max = parse_bounded(value, 1, MAX_MAX).ok_or_else(|| ArgError::InvalidMax(text(param)))?;
    }

    Ok(Resnapshot { enabled, max })
}

/// The `[warn]` for arguments that parse but mean nothing, in nginx's
/// wording (nginx appends ` in FILE:LINE`): `max=` with `off`, which only
/// observes and never re-snapshots. A warning, not a refusal: switching an
/// upstream to `off` during an incident must not fail the reload.
pub fn warning<S: AsRef<[u8]>>(args: &[S], parsed: Resnapshot) -> Option<String> {
    match args {
        [_, max] if !parsed.enabled => Some(format!(
            "\"{}\" has no effect with \"off\" in \"{DIRECTIVE}\" directive, \
             \"off\" never re-snapshots",
            String::from_utf8_lossy(max.as_ref())
        )),
        _ => None,
    }
}

/// Decimal digits only (no sign, no spaces), within `lo..=hi`.
fn parse_bounded(value: &[u8], lo: u32, hi: u32) -> Option<u32> {
    if value.is_empty() || value.len() > 10 || !value.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = std::str::from_utf8(value).ok()?.parse::<u64>().ok()?;
    (u64::from(lo)..=u64::from(hi))
        .contains(&n)
        .then_some(n as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Resnapshot, ArgError> {
        parse_resnapshot(args)
    }

    #[test]
    fn on_and_off_take_the_default_max() {
        assert_eq!(
            parse(&["on"]),
            Ok(Resnapshot {
                enabled: true,
                max: DEFAULT_MAX
            })
        );
        assert_eq!(
            parse(&["off"]),
            Ok(Resnapshot {
                enabled: false,
                max: DEFAULT_MAX
            })
        );
    }

    #[test]
    fn max_with_off_is_kept_and_warned_about() {
        let warn = |args: &[&str]| warning(args, parse(args).unwrap());
        assert_eq!(
            warn(&["off", "max=3"]).as_deref(),
            Some(
                "\"max=3\" has no effect with \"off\" in \"generation_retry_resnapshot\" \
                 directive, \"off\" never re-snapshots"
            )
        );
        assert_eq!(warn(&["off"]), None);
        assert_eq!(warn(&["on", "max=3"]), None);
        assert_eq!(warn(&["on"]), None);
    }

    #[test]
    fn max_in_range_is_kept() {
        assert_eq!(parse(&["on", "max=1"]).unwrap().max, 1);
        assert_eq!(parse(&["off", "max=16"]).unwrap().max, 16);
    }

    #[test]
    fn bad_switch_is_named() {
        assert_eq!(parse(&["yes"]), Err(ArgError::InvalidSwitch("yes".into())));
        assert_eq!(parse(&["ON"]), Err(ArgError::InvalidSwitch("ON".into())));
        assert_eq!(parse(&[""]), Err(ArgError::InvalidSwitch("".into())));
    }

    #[test]
    fn max_out_of_range_or_malformed_is_refused() {
        for bad in [
            "max=0",
            "max=17",
            "max=",
            "max=-1",
            "max=+2",
            "max= 2",
            "max=2x",
            "max=99999999999999999999",
        ] {
            assert_eq!(
                parse(&["on", bad]),
                Err(ArgError::InvalidMax(bad.into())),
                "{bad}"
            );
        }
    }

    #[test]
    fn unknown_parameter_and_arity() {
        assert_eq!(
            parse(&["on", "limit=2"]),
            Err(ArgError::UnknownParameter("limit=2".into()))
        );
        assert_eq!(parse(&[]), Err(ArgError::Arity(0)));
        assert_eq!(parse(&["on", "max=2", "x"]), Err(ArgError::Arity(3)));
    }

    #[test]
    fn messages_are_operator_readable() {
        assert_eq!(
            ArgError::InvalidMax("max=0".into()).message("d"),
            "invalid value \"max=0\" in \"d\" directive, max must be 1..16"
        );
        assert_eq!(
            ArgError::InvalidSwitch("yes".into()).to_string(),
            "invalid value \"yes\" in \"generation_retry_resnapshot\" directive, \
             it must be \"on\" or \"off\""
        );
    }
}
