//! The module's own readers of outside input: `generation_retry_resnapshot`'s
//! arguments, against a model of the grammar, and the status endpoint's
//! query string (`wants_json`), against a second reading of "an argument
//! `format=json`".

use generation_retry_core::directive::{parse_resnapshot, warning, ArgError, DIRECTIVE, MAX_MAX};
use generation_retry_core::metrics::wants_json;

use super::Gen;
const DIRECTIVE_DICT: &[&str] = &[
    "on",
    "off",
    "max=",
    "max=1",
    "max=16",
    "max=17",
    "max=0",
    "max=01",
    "max=-1",
    "max=+2",
    "MAX=2",
    "On",
    "0",
    "16",
    "9999999999",
    "99999999999",
    " ",
    "max",
];

/// Up to four arguments, separated by NUL in the input.
pub(super) fn gen_directive(g: &mut Gen) -> Vec<u8> {
    let n = g.below(5);
    let mut out = Vec::new();
    for i in 0..n {
        if i > 0 {
            out.push(0);
        }
        out.extend(g.bytes(DIRECTIVE_DICT, 3));
    }
    out
}

pub(super) fn split_args(input: &[u8]) -> Vec<&[u8]> {
    if input.is_empty() {
        return Vec::new();
    }
    input.split(|&b| b == 0).collect()
}

/// The grammar, stated again: `on|off [max=N]`, N decimal digits only,
/// 1..=MAX_MAX.
fn model_directive(args: &[&[u8]]) -> Result<(bool, u32), &'static str> {
    if args.is_empty() || args.len() > 2 {
        return Err("arity");
    }
    let on = match args[0] {
        b"on" => true,
        b"off" => false,
        _ => return Err("switch"),
    };
    let Some(&max) = args.get(1) else {
        return Ok((on, 2));
    };
    let Some(digits) = max.strip_prefix(b"max=") else {
        return Err("parameter");
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err("max");
    }
    // Leading zeros are digits: "max=01" is 1. Past 10 digits nothing is
    // in range.
    let trimmed: &[u8] = {
        let nz = digits
            .iter()
            .position(|&d| d != b'0')
            .unwrap_or(digits.len());
        &digits[nz..]
    };
    if trimmed.len() > 2 || digits.len() > 10 {
        return Err("max");
    }
    let n: u32 = std::str::from_utf8(trimmed)
        .unwrap_or("0")
        .parse()
        .unwrap_or(0);
    if !(1..=MAX_MAX).contains(&n) {
        return Err("max");
    }
    Ok((on, n))
}

pub(super) fn check_directive(input: &[u8]) -> Result<bool, String> {
    let args = split_args(input);
    let got = parse_resnapshot(&args);
    let want = model_directive(&args);
    match (&got, want) {
        (Ok(r), Ok((on, max))) if r.enabled == on && r.max == max => {
            let warned = warning(&args, *r).is_some();
            if warned != (!on && args.len() == 2) {
                return Err(format!("{args:?}: warning {warned} for {r:?}"));
            }
            Ok(true)
        }
        (Err(e), Err(kind)) => {
            let matches = matches!(
                (e, kind),
                (ArgError::Arity(_), "arity")
                    | (ArgError::InvalidSwitch(_), "switch")
                    | (ArgError::UnknownParameter(_), "parameter")
                    | (ArgError::InvalidMax(_), "max")
            );
            let message = e.message(DIRECTIVE);
            if !matches || !message.contains(&format!("\"{DIRECTIVE}\" directive")) {
                return Err(format!(
                    "{args:?}: {e:?} ({message}), the grammar says {kind}"
                ));
            }
            Ok(true)
        }
        _ => Err(format!(
            "{args:?}: parsed {got:?}, the grammar says {want:?}"
        )),
    }
}

const QUERY_DICT: &[&str] = &[
    "format=json",
    "format=",
    "json",
    "&",
    "=",
    "format=JSON",
    "format=json&",
    "&format=json",
    "format=jsonx",
    "xformat=json",
    "%66ormat=json",
    "format=prometheus",
    "?",
];

pub(super) fn gen_query(g: &mut Gen) -> Vec<u8> {
    g.bytes(QUERY_DICT, 6)
}

pub(super) fn check_query(input: &[u8]) -> Result<bool, String> {
    // "An argument is exactly format=json": at the start or after `&`,
    // and at the end or before `&`.
    let needle = b"format=json";
    let mut want = false;
    for start in 0..input.len() {
        if input[start..].starts_with(needle)
            && (start == 0 || input[start - 1] == b'&')
            && matches!(input.get(start + needle.len()), None | Some(b'&'))
        {
            want = true;
        }
    }
    let got = wants_json(input);
    if got != want {
        return Err(format!(
            "{:?}: wants_json {got}, expected {want}",
            String::from_utf8_lossy(input)
        ));
    }
    Ok(true)
}
