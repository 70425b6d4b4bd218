//! Time stamps as nginx writes them, turned into milliseconds since the
//! Unix epoch (UTC): `$msec`, `$time_iso8601`, `$time_local` in access logs
//! and the zone-less local time at the start of every error-log line.
//!
//! Every parser takes untrusted text and returns `None` for anything that
//! is not exactly the expected shape; none of them can panic.

/// Days from 1970-01-01 to the given proleptic Gregorian date (Howard
/// Hinnant's `days_from_civil`).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let mp = if m > 2 { m - 3 } else { m + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn is_leap(year: i64) -> bool {
    (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
}

fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// A calendar date and time of day, as written (before any zone offset).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Civil {
    pub year: i64,
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
}

impl Civil {
    /// Milliseconds since the epoch, reading the fields as UTC; `None` for
    /// an impossible date or time (a leap second `:60` is accepted).
    pub fn to_ms(self) -> Option<i64> {
        if !(1..=12).contains(&self.month)
            || self.day == 0
            || self.day > days_in_month(self.year, self.month)
            || self.hour > 23
            || self.minute > 59
            || self.second > 60
        {
            return None;
        }
        let days = days_from_civil(self.year, self.month, self.day);
        let secs = days * 86_400
            + i64::from(self.hour) * 3_600
            + i64::from(self.minute) * 60
            + i64::from(self.second);
        secs.checked_mul(1_000)
    }
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

/// `$time_iso8601`: `2026-12-01T07:00:00+00:00`. Returns the UTC
/// milliseconds and the offset in seconds.
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
    let civil = Civil {
        year: i64::from(field(s, 0, 4)?),
        month: field(s, 5, 7)?,
        day: field(s, 8, 10)?,
        hour: field(s, 11, 13)?,
        minute: field(s, 14, 16)?,
        second: field(s, 17, 19)?,
    };
    let offset = parse_utc_offset(s.get(19..)?)?;
    Some((civil.to_ms()? - i64::from(offset) * 1_000, offset))
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

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
    let month_name = s.get(3..6)?;
    let month = MONTHS.iter().position(|m| *m == month_name)? as u32 + 1;
    let civil = Civil {
        year: i64::from(field(s, 7, 11)?),
        month,
        day: field(s, 0, 2)?,
        hour: field(s, 12, 14)?,
        minute: field(s, 15, 17)?,
        second: field(s, 18, 20)?,
    };
    let offset = parse_utc_offset(s.get(21..)?)?;
    Some((civil.to_ms()? - i64::from(offset) * 1_000, offset))
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
    let civil = Civil {
        year: i64::from(field(s, 0, 4)?),
        month: field(s, 5, 7)?,
        day: field(s, 8, 10)?,
        hour: field(s, 11, 13)?,
        minute: field(s, 14, 16)?,
        second: field(s, 17, 19)?,
    };
    Some(civil.to_ms()? - i64::from(offset_s) * 1_000)
}

/// The proleptic Gregorian date of a day count from 1970-01-01 (Howard
/// Hinnant's `civil_from_days`): (year, month, day).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The civil fields of `ms` shifted by `offset_s` east of UTC.
fn civil_of(ms: i64, offset_s: i32) -> Civil {
    let secs = ms.div_euclid(1_000) + i64::from(offset_s);
    let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
    let tod = secs.rem_euclid(86_400);
    Civil {
        year,
        month,
        day,
        hour: (tod / 3_600) as u32,
        minute: (tod % 3_600 / 60) as u32,
        second: (tod % 60) as u32,
    }
}

/// `$msec` as nginx writes it: seconds, a dot, three digits.
pub fn format_msec(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1_000), ms.rem_euclid(1_000))
}

/// `$time_local` as nginx writes it, in the zone `offset_s`.
pub fn format_time_local(ms: i64, offset_s: i32) -> String {
    let c = civil_of(ms, offset_s);
    let month = MONTHS.get(c.month as usize - 1).copied().unwrap_or("???");
    format!(
        "{:02}/{month}/{:04}:{:02}:{:02}:{:02} {}",
        c.day,
        c.year,
        c.hour,
        c.minute,
        c.second,
        format_offset(offset_s)
    )
}

/// `$time_iso8601` as nginx writes it, in the zone `offset_s`.
pub fn format_iso8601(ms: i64, offset_s: i32) -> String {
    let c = civil_of(ms, offset_s);
    let off = format_offset(offset_s);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}{}:{}",
        c.year,
        c.month,
        c.day,
        c.hour,
        c.minute,
        c.second,
        &off[..3],
        &off[3..]
    )
}

/// The error log's time stamp for `ms` in the zone `offset_s`.
pub fn format_error_time(ms: i64, offset_s: i32) -> String {
    let c = civil_of(ms, offset_s);
    format!(
        "{:04}/{:02}/{:02} {:02}:{:02}:{:02}",
        c.year, c.month, c.day, c.hour, c.minute, c.second
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
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(days_from_civil(1969, 12, 31), -1);
        assert_eq!(
            days_from_civil(2026, 12, 1) * 86_400_000,
            DEC1_0700 - 7 * 3_600_000
        );
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
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        assert_eq!(civil_from_days(11_017), (2000, 3, 1));
        for days in [-800_000, -1, 0, 59, 11_016, 20_788, 2_000_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
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
    }
}
