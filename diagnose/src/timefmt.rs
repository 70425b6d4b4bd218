//! Time stamps as nginx writes them, turned into milliseconds since the
//! Unix epoch (UTC): `$msec`, `$time_iso8601`, `$time_local` in access logs
//! and the zone-less local time at the start of every error-log line; and
//! back, for the report.
//!
//! The calendar (month lengths, leap years, counting days, a time in a
//! zone) is the `time` crate's. This module knows nginx's fixed layouts:
//! it checks each one byte by byte and reads its digits itself, which
//! keeps the per-line parse free of allocation and of a general format
//! interpreter.
//!
//! Every parser takes untrusted text and returns `None` for anything that
//! is not exactly the expected shape; none of them can panic.

use time::{Date, Month, OffsetDateTime, UtcOffset};

/// The month names of `$time_local`, as nginx writes them (`%b` in the C
/// locale).
const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Milliseconds since the epoch of a date and time of day read as UTC;
/// `None` for an impossible date or time. A leap second `:60` is accepted
/// (as the next minute's first second).
fn utc_ms(year: u32, month: Month, day: u32, hms: (u32, u32, u32)) -> Option<i64> {
    let (hour, minute, second) = hms;
    if hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let date =
        Date::from_calendar_date(i32::try_from(year).ok()?, month, u8::try_from(day).ok()?).ok()?;
    let secs = date.midnight().assume_utc().unix_timestamp()
        + i64::from(hour) * 3_600
        + i64::from(minute) * 60
        + i64::from(second);
    secs.checked_mul(1_000)
}

/// A month number 1 to 12.
fn month_number(n: u32) -> Option<Month> {
    Month::try_from(u8::try_from(n).ok()?).ok()
}

/// A month's name as nginx writes it (`Dec`), exactly.
fn month_abbreviation(s: &str) -> Option<Month> {
    let i = MONTHS.iter().position(|m| *m == s)?;
    month_number(i as u32 + 1)
}

/// The name nginx writes for `month`.
fn month_name(month: Month) -> &'static str {
    MONTHS[usize::from(u8::from(month)) - 1]
}

/// The decimal value of `s` if it is 1 to 9 ASCII digits.
fn digits(s: &str) -> Option<u32> {
    if s.is_empty() || s.len() > 9 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `s[a..b]` as a number of exactly `b - a` digits.
fn field(s: &str, a: usize, b: usize) -> Option<u32> {
    digits(s.get(a..b)?)
}

/// Whether byte `i` of `s` is `c`.
fn byte_is(s: &str, i: usize, c: u8) -> bool {
    s.as_bytes().get(i) == Some(&c)
}

/// The hour, minute and second at `s[i..i + 8]` (`HH:MM:SS`, the colons
/// checked by the caller).
fn hms(s: &str, i: usize) -> Option<(u32, u32, u32)> {
    Some((
        field(s, i, i + 2)?,
        field(s, i + 3, i + 5)?,
        field(s, i + 6, i + 8)?,
    ))
}

/// `$msec`: `1733041234.567` (seconds, optional fraction of up to 3 digits).
pub fn parse_msec(s: &str) -> Option<i64> {
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, f),
        None => (s, ""),
    };
    if int.is_empty() || int.len() > 12 || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs: i64 = int.parse().ok()?;
    let mut ms: i64 = 0;
    for (i, b) in frac.bytes().enumerate() {
        ms += i64::from(b - b'0') * [100, 10, 1][i];
    }
    secs.checked_mul(1_000)?.checked_add(ms)
}

/// A zone offset `+HHMM`, `-HHMM`, `+HH:MM` or `Z`, in seconds east of UTC.
pub fn parse_utc_offset(s: &str) -> Option<i32> {
    if s == "Z" {
        return Some(0);
    }
    let sign = match s.as_bytes().first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let rest = s.get(1..)?;
    let (h, m) = match rest.len() {
        4 => (field(rest, 0, 2)?, field(rest, 2, 4)?),
        5 if byte_is(rest, 2, b':') => (field(rest, 0, 2)?, field(rest, 3, 5)?),
        _ => return None,
    };
    if h > 23 || m > 59 {
        return None;
    }
    Some(sign * (h as i32 * 3_600 + m as i32 * 60))
}

/// Formats an offset in seconds as `+HHMM`.
pub fn format_offset(offset_s: i32) -> String {
    let sign = if offset_s < 0 { '-' } else { '+' };
    let a = offset_s.unsigned_abs();
    format!("{sign}{:02}{:02}", a / 3_600, (a % 3_600) / 60)
}

/// `$time_iso8601`: `2026-12-01T07:00:00+00:00` (also `Z` or `+0000` as
/// the zone). Returns the UTC milliseconds and the offset in seconds.
pub fn parse_iso8601(s: &str) -> Option<(i64, i32)> {
    if s.len() < 20
        || !byte_is(s, 4, b'-')
        || !byte_is(s, 7, b'-')
        || !byte_is(s, 10, b'T')
        || !byte_is(s, 13, b':')
        || !byte_is(s, 16, b':')
    {
        return None;
    }
    let month = month_number(field(s, 5, 7)?)?;
    let ms = utc_ms(field(s, 0, 4)?, month, field(s, 8, 10)?, hms(s, 11)?)?;
    let offset = parse_utc_offset(s.get(19..)?)?;
    Some((ms - i64::from(offset) * 1_000, offset))
}

/// `$time_local`: `01/Dec/2026:07:00:00 +0000`. Returns the UTC
/// milliseconds and the offset in seconds.
pub fn parse_time_local(s: &str) -> Option<(i64, i32)> {
    if s.len() != 26
        || !byte_is(s, 2, b'/')
        || !byte_is(s, 6, b'/')
        || !byte_is(s, 11, b':')
        || !byte_is(s, 14, b':')
        || !byte_is(s, 17, b':')
        || !byte_is(s, 20, b' ')
    {
        return None;
    }
    let month = month_abbreviation(s.get(3..6)?)?;
    let ms = utc_ms(field(s, 7, 11)?, month, field(s, 0, 2)?, hms(s, 12)?)?;
    let offset = parse_utc_offset(s.get(21..)?)?;
    Some((ms - i64::from(offset) * 1_000, offset))
}

/// The error log's `2026/12/01 07:00:00` (local time, no zone), read as
/// UTC shifted by `offset_s` (the server's offset east of UTC).
pub fn parse_error_time(s: &str, offset_s: i32) -> Option<i64> {
    if s.len() != 19
        || !byte_is(s, 4, b'/')
        || !byte_is(s, 7, b'/')
        || !byte_is(s, 10, b' ')
        || !byte_is(s, 13, b':')
        || !byte_is(s, 16, b':')
    {
        return None;
    }
    let month = month_number(field(s, 5, 7)?)?;
    let ms = utc_ms(field(s, 0, 4)?, month, field(s, 8, 10)?, hms(s, 11)?)?;
    Some(ms - i64::from(offset_s) * 1_000)
}

/// `ms` (truncated to the second) in the zone `offset_s`, seconds east of
/// UTC; `None` beyond what `time` holds (years -9999 to 9999).
fn in_zone(ms: i64, offset_s: i32) -> Option<OffsetDateTime> {
    let offset = UtcOffset::from_whole_seconds(offset_s).ok()?;
    OffsetDateTime::from_unix_timestamp(ms.div_euclid(1_000))
        .ok()?
        .checked_to_offset(offset)
}

/// `$msec` as nginx writes it: seconds, a dot, three digits.
pub fn format_msec(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1_000), ms.rem_euclid(1_000))
}

/// `$time_local` as nginx writes it, in the zone `offset_s` (`$msec` for
/// a time beyond the year 9999).
pub fn format_time_local(ms: i64, offset_s: i32) -> String {
    let Some(t) = in_zone(ms, offset_s) else {
        return format_msec(ms);
    };
    format!(
        "{:02}/{}/{:04}:{:02}:{:02}:{:02} {}",
        t.day(),
        month_name(t.month()),
        t.year(),
        t.hour(),
        t.minute(),
        t.second(),
        format_offset(offset_s)
    )
}

/// `$time_iso8601` as nginx writes it, in the zone `offset_s` (`$msec`
/// for a time beyond the year 9999).
pub fn format_iso8601(ms: i64, offset_s: i32) -> String {
    let Some(t) = in_zone(ms, offset_s) else {
        return format_msec(ms);
    };
    let off = format_offset(offset_s);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{}:{}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second(),
        &off[..3],
        &off[3..]
    )
}

/// The error log's time stamp for `ms` in the zone `offset_s` (`$msec`
/// for a time beyond the year 9999).
pub fn format_error_time(ms: i64, offset_s: i32) -> String {
    let Some(t) = in_zone(ms, offset_s) else {
        return format_msec(ms);
    };
    format!(
        "{:04}/{:02}/{:02} {:02}:{:02}:{:02}",
        t.year(),
        u8::from(t.month()),
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-01T07:00:00Z, computed independently: 20788 days after the
    /// epoch (1970..2026 has 56 years, 14 of them leap: 20454 days) plus 334.
    const DEC1_0700: i64 = (20_454 + 334) * 86_400_000 + 7 * 3_600_000;

    #[test]
    fn civil_dates() {
        let day = |s: &str| parse_error_time(&format!("{s} 00:00:00"), 0).map(|ms| ms / 86_400_000);
        assert_eq!(day("1970/01/01"), Some(0));
        assert_eq!(day("2000/03/01"), Some(11_017));
        assert_eq!(
            parse_error_time("1969/12/31 00:00:00", 0),
            Some(-86_400_000)
        );
        assert_eq!(day("2026/12/01"), Some(20_788));
        assert_eq!(day("2024/02/29"), Some(19_782));
        assert_eq!(day("2023/02/29"), None);
        assert_eq!(day("1900/02/29"), None);
        assert_eq!(day("2000/02/29"), Some(11_016));
        assert_eq!(day("2026/04/31"), None);
        assert_eq!(day("2026/13/01"), None);
        assert_eq!(day("2026/00/10"), None);
        assert_eq!(day("2026/01/00"), None);
        assert_eq!(
            parse_error_time("2026/12/01 06:59:60", 0),
            Some(DEC1_0700),
            "a leap second reads as the next minute's first"
        );
        assert_eq!(parse_error_time("2026/12/01 07:60:00", 0), None);
    }

    #[test]
    fn month_abbreviations() {
        for (n, name) in [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ]
        .iter()
        .enumerate()
        {
            assert_eq!(month_abbreviation(name).map(u8::from), Some(n as u8 + 1));
        }
        for bad in ["dec", "DEC", "De", "Dece", "", "Dex", "12"] {
            assert_eq!(month_abbreviation(bad), None, "{bad}");
        }
    }

    #[test]
    fn msec() {
        assert_eq!(parse_msec("1733041234.567"), Some(1_733_041_234_567));
        assert_eq!(parse_msec("1733041234.5"), Some(1_733_041_234_500));
        assert_eq!(parse_msec("1733041234"), Some(1_733_041_234_000));
        assert_eq!(parse_msec("1733041234.5678"), None);
        assert_eq!(parse_msec("-1.0"), None);
        assert_eq!(parse_msec(".5"), None);
        assert_eq!(parse_msec("99999999999999999999"), None);
    }

    #[test]
    fn iso8601_honours_offset() {
        assert_eq!(
            parse_iso8601("2026-12-01T07:00:00+00:00"),
            Some((DEC1_0700, 0))
        );
        assert_eq!(
            parse_iso8601("2026-12-01T08:00:00+01:00"),
            Some((DEC1_0700, 3_600))
        );
        assert_eq!(parse_iso8601("2026-12-01T07:00:00Z"), Some((DEC1_0700, 0)));
        assert_eq!(parse_iso8601("2026-02-30T07:00:00+00:00"), None);
        assert_eq!(parse_iso8601("2026-12-01 07:00:00+00:00"), None);
    }

    #[test]
    fn time_local_honours_offset() {
        assert_eq!(
            parse_time_local("01/Dec/2026:07:00:00 +0000"),
            Some((DEC1_0700, 0))
        );
        assert_eq!(
            parse_time_local("01/Dec/2026:02:00:00 -0500"),
            Some((DEC1_0700, -18_000))
        );
        assert_eq!(parse_time_local("01/Dex/2026:07:00:00 +0000"), None);
        assert_eq!(parse_time_local("01/dec/2026:07:00:00 +0000"), None);
        assert_eq!(parse_time_local("31/Nov/2026:07:00:00 +0000"), None);
        assert_eq!(parse_time_local("01/Dec/2026:07:00:00"), None);
    }

    #[test]
    fn error_time_and_offsets() {
        assert_eq!(parse_error_time("2026/12/01 07:00:00", 0), Some(DEC1_0700));
        assert_eq!(
            parse_error_time("2026/12/01 09:00:00", 7_200),
            Some(DEC1_0700)
        );
        assert_eq!(parse_error_time("2026/12/01 25:00:00", 0), None);
        assert_eq!(parse_utc_offset("+0530"), Some(19_800));
        assert_eq!(parse_utc_offset("-08:00"), Some(-28_800));
        assert_eq!(parse_utc_offset("0530"), None);
        assert_eq!(parse_utc_offset("+2400"), None);
        assert_eq!(format_offset(-28_800), "-0800");
        assert_eq!(format_offset(19_800), "+0530");
    }

    #[test]
    fn formatting_round_trips() {
        let t = DEC1_0700 + 1_250;
        assert_eq!(format_msec(t), "1796108401.250");
        assert_eq!(parse_msec(&format_msec(t)), Some(t));
        let local = format_time_local(t, -18_000);
        assert_eq!(local, "01/Dec/2026:02:00:01 -0500");
        assert_eq!(parse_time_local(&local), Some((DEC1_0700 + 1_000, -18_000)));
        let iso = format_iso8601(t, 19_800);
        assert_eq!(iso, "2026-12-01T12:30:01+05:30");
        assert_eq!(parse_iso8601(&iso), Some((DEC1_0700 + 1_000, 19_800)));
        let e = format_error_time(t, 3_600);
        assert_eq!(e, "2026/12/01 08:00:01");
        assert_eq!(parse_error_time(&e, 3_600), Some(DEC1_0700 + 1_000));
        assert_eq!(format_time_local(0, -1_800), "31/Dec/1969:23:30:00 -0030");
        assert_eq!(format_iso8601(0, 0), "1970-01-01T00:00:00+00:00");
        assert_eq!(format_error_time(-1, 0), "1969/12/31 23:59:59");
        // Days of years 0 to 9999 (and around 2000-02-29), through each layout
        // and back.
        for day in (-719_000_i64..2_932_000).step_by(331).chain(11_000..11_100) {
            let ms = day * 86_400_000 + 45_296_000;
            for off in [-43_200, -1_800, 0, 19_800, 50_400] {
                let text = format_time_local(ms, off);
                assert_eq!(parse_time_local(&text), Some((ms, off)), "{text}");
                let text = format_iso8601(ms, off);
                assert_eq!(parse_iso8601(&text), Some((ms, off)), "{text}");
                let text = format_error_time(ms, off);
                assert_eq!(parse_error_time(&text, off), Some(ms), "{text}");
            }
        }
        // Beyond what `time` holds: `$msec`, no panic.
        assert_eq!(format_time_local(i64::MAX, 0), format_msec(i64::MAX));
        assert_eq!(format_error_time(i64::MIN, 3_600), format_msec(i64::MIN));
    }
}
