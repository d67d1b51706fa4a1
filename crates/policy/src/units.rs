//! Rates, sizes and times as operators write them (`10Gbit`, `64KiB`, `500ms`), and
//! back. Parsing is strict: a bare number or an unknown unit is an error, because a
//! silently guessed unit is off by orders of magnitude.

use std::fmt;

/// A unit mistake, with the message and the hint kept apart so that the policy
/// parser can place each in its own field of [`crate::PolicyError`].
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UnitError {
    pub message: String,
    pub hint: Option<String>,
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(hint) = &self.hint {
            write!(f, " (hint: {hint})")?;
        }
        Ok(())
    }
}

impl UnitError {
    fn new(message: String, hint: Option<String>) -> UnitError {
        UnitError { message, hint }
    }
}

const RATE_UNITS: &[(&str, f64)] = &[
    ("bit", 1.0),
    ("kbit", 1e3),
    ("Kbit", 1e3),
    ("Mbit", 1e6),
    ("mbit", 1e6),
    ("Gbit", 1e9),
    ("gbit", 1e9),
    ("Tbit", 1e12),
    ("tbit", 1e12),
];
const RATE_NAMES: &str = "bit, kbit, Mbit, Gbit, Tbit";

const SIZE_UNITS: &[(&str, f64)] = &[
    ("B", 1.0),
    ("KB", 1e3),
    ("MB", 1e6),
    ("GB", 1e9),
    ("KiB", 1024.0),
    ("MiB", 1048576.0),
    ("GiB", 1073741824.0),
];
const SIZE_NAMES: &str = "B, KB, MB, GB, KiB, MiB, GiB";

const TIME_UNITS: &[(&str, f64)] = &[("ns", 1.0), ("us", 1e3), ("ms", 1e6), ("s", 1e9)];
const TIME_NAMES: &str = "ns, us, ms, s";

/// Splits `12.5Gbit` into its number and its unit and checks the number.
fn split_number(text: &str, what: &str, example: &str) -> Result<(f64, String), UnitError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(UnitError::new(
            format!("empty {what}"),
            Some(format!("write e.g. `{example}`")),
        ));
    }
    if text.starts_with('-') {
        return Err(UnitError::new(
            format!("negative {what} `{text}`"),
            Some(format!("a {what} is at least 0, e.g. `{example}`")),
        ));
    }
    let digits_end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    let number_ok = !number.is_empty()
        && number.chars().any(|c| c.is_ascii_digit())
        && !number[1..].contains('+');
    let value: f64 = match number.parse() {
        Ok(v) if number_ok => v,
        _ => {
            return Err(UnitError::new(
                format!("`{text}` is not a {what}"),
                Some(format!("write a number and a unit, e.g. `{example}`")),
            ));
        }
    };
    if !value.is_finite() {
        return Err(UnitError::new(
            format!("{what} `{text}` is out of range"),
            Some(format!(
                "write a finite number and a unit, e.g. `{example}`"
            )),
        ));
    }
    Ok((value, unit.trim().to_owned()))
}

fn scale(
    text: &str,
    what: &str,
    value: f64,
    factor: f64,
    base_unit: &str,
) -> Result<u64, UnitError> {
    let number = text.trim_end_matches(|c: char| !c.is_ascii_digit() && c != '.');
    // Whole numbers are scaled in integers, exactly; f64 would round past 2^53.
    if let Ok(whole) = number.trim().trim_start_matches('+').parse::<u64>() {
        return whole
            .checked_mul(factor as u64)
            .ok_or_else(|| too_large(text, what));
    }
    let scaled = value * factor;
    // u64::MAX is not representable in f64; 2^64 is the first value past it.
    if !scaled.is_finite() || scaled >= 18_446_744_073_709_551_616.0 {
        return Err(too_large(text, what));
    }
    let rounded = scaled.round();
    // Decimal fractions such as 0.1 are inexact in binary; only a real fraction of the
    // base unit (half a byte) is a mistake.
    if (scaled - rounded).abs() > 1e-6 * scaled.max(1.0) {
        return Err(UnitError::new(
            format!("{what} `{text}` is not a whole number of {base_unit}"),
            Some(format!("round it to whole {base_unit}")),
        ));
    }
    Ok(rounded as u64)
}

fn too_large(text: &str, what: &str) -> UnitError {
    UnitError::new(
        format!("{what} `{text}` is too large"),
        Some(format!(
            "a {what} in its base unit must fit in 64 bits, and the policy's bounds are far below that"
        )),
    )
}

fn missing_unit(text: &str, what: &str, units: &str, example: &str) -> UnitError {
    UnitError::new(
        format!("{what} `{text}` has no unit"),
        Some(format!("expected one of {units}, e.g. `{example}`")),
    )
}

fn unknown_unit(text: &str, unit: &str, what: &str, units: &str) -> UnitError {
    UnitError::new(
        format!("unknown {what} unit `{unit}` in `{text}`"),
        Some(format!("expected one of {units}")),
    )
}

pub(crate) fn rate_bps(text: &str) -> Result<u64, UnitError> {
    let (value, unit) = split_number(text, "rate", "10Gbit")?;
    let text = text.trim();
    if unit.is_empty() {
        return Err(missing_unit(text, "rate", RATE_NAMES, "10Gbit"));
    }
    if let Some(hint) = bytes_per_second_hint(value, &unit) {
        return Err(UnitError::new(
            format!("rate unit `{unit}` is refused in `{text}`"),
            Some(hint),
        ));
    }
    match RATE_UNITS.iter().find(|(name, _)| *name == unit) {
        Some(&(_, factor)) => scale(text, "rate", value, factor, "bit/s"),
        None => Err(unknown_unit(text, &unit, "rate", RATE_NAMES)),
    }
}

/// The hint for a rate written in `bps`, `Mbps`, `kb/s` and the like, which
/// people read as bits and tc as bytes per second: both readings, written in the
/// unit of the same magnitude, so that neither is a factor of 1000 away.
fn bytes_per_second_hint(value: f64, unit: &str) -> Option<String> {
    let lower = unit.to_ascii_lowercase();
    let prefix = lower
        .strip_suffix("bps")
        .or_else(|| lower.strip_suffix("b/s"))?;
    let bits = match prefix {
        "" => "bit",
        "k" => "kbit",
        "m" => "Mbit",
        "g" => "Gbit",
        "t" => "Tbit",
        _ => return None,
    };
    let number = |x: f64| format!("{}", (x * 1e6).round() / 1e6);
    Some(format!(
        "tc reads `{unit}` as bytes per second, people as bits, a factor-of-8 mistake either way: write `{}{bits}` for bits per second, or `{}{bits}` for bytes per second",
        number(value),
        number(value * 8.0)
    ))
}

pub(crate) fn size_bytes(text: &str) -> Result<u64, UnitError> {
    let (value, unit) = split_number(text, "size", "1500B")?;
    let text = text.trim();
    if unit.is_empty() {
        return Err(missing_unit(text, "size", SIZE_NAMES, "1500B"));
    }
    match SIZE_UNITS.iter().find(|(name, _)| *name == unit) {
        Some(&(_, factor)) => scale(text, "size", value, factor, "bytes"),
        None => Err(unknown_unit(text, &unit, "size", SIZE_NAMES)),
    }
}

pub(crate) fn time_ns(text: &str) -> Result<u64, UnitError> {
    let (value, unit) = split_number(text, "time", "500ms")?;
    let text = text.trim();
    if unit.is_empty() {
        return Err(missing_unit(text, "time", TIME_NAMES, "500ms"));
    }
    match TIME_UNITS.iter().find(|(name, _)| *name == unit) {
        Some(&(_, factor)) => scale(text, "time", value, factor, "nanoseconds"),
        None => Err(unknown_unit(text, &unit, "time", TIME_NAMES)),
    }
}

/// Parses a rate such as `10Gbit` or `2.5Gbit` into bit/s.
pub fn parse_rate(text: &str) -> Result<u64, String> {
    rate_bps(text).map_err(|e| e.to_string())
}

/// Parses a size such as `1500B` or `64KiB` into bytes.
pub fn parse_size(text: &str) -> Result<u64, String> {
    size_bytes(text).map_err(|e| e.to_string())
}

/// Parses a time such as `500ms` into nanoseconds.
pub fn parse_time(text: &str) -> Result<u64, String> {
    time_ns(text).map_err(|e| e.to_string())
}

/// Up to three decimals, trailing zeros dropped: `2.5`, `500`, `1.235`.
fn short_decimal(value: f64) -> String {
    let text = format!("{value:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_owned()
    } else {
        text.to_owned()
    }
}

/// A rate for people: `2.5Gbit`, `500Mbit`, `0bit`.
pub fn format_rate(bps: f64) -> String {
    if !bps.is_finite() {
        return if bps.is_nan() {
            "NaN".to_owned()
        } else if bps > 0.0 {
            "inf".to_owned()
        } else {
            "-inf".to_owned()
        };
    }
    let magnitude = bps.abs();
    let (factor, unit) = [(1e12, "Tbit"), (1e9, "Gbit"), (1e6, "Mbit"), (1e3, "kbit")]
        .into_iter()
        .find(|&(factor, _)| magnitude >= factor * 0.9995)
        .unwrap_or((1.0, "bit"));
    format!("{}{unit}", short_decimal(bps / factor))
}

/// The largest unit that writes `value` exactly, so the text parses back to it.
fn format_exact(value: u64, units: &[(&str, u64)], base: &str) -> String {
    units
        .iter()
        .find(|&&(_, factor)| value != 0 && value.is_multiple_of(factor))
        .map(|&(unit, factor)| format!("{}{unit}", value / factor))
        .unwrap_or_else(|| format!("{value}{base}"))
}

/// A size that parses back exactly: `1500B`, `64KiB`, `16MB`.
pub fn format_size(bytes: u64) -> String {
    format_exact(
        bytes,
        &[
            ("GB", 1_000_000_000),
            ("GiB", 1 << 30),
            ("MB", 1_000_000),
            ("MiB", 1 << 20),
            ("KB", 1000),
            ("KiB", 1 << 10),
        ],
        "B",
    )
}

/// A time that parses back exactly: `500ms`, `15s`, `20us`.
pub fn format_time(ns: u64) -> String {
    format_exact(
        ns,
        &[("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1000)],
        "ns",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates() {
        assert_eq!(parse_rate("10Gbit"), Ok(10_000_000_000));
        assert_eq!(parse_rate("2.5Gbit"), Ok(2_500_000_000));
        assert_eq!(parse_rate("500Mbit"), Ok(500_000_000));
        assert_eq!(parse_rate("500mbit"), Ok(500_000_000));
        assert_eq!(parse_rate("0.1gbit"), Ok(100_000_000));
        assert_eq!(parse_rate("64kbit"), Ok(64_000));
        assert_eq!(parse_rate("1Tbit"), Ok(1_000_000_000_000));
        assert_eq!(parse_rate("7bit"), Ok(7));
        assert_eq!(parse_rate(" 1 Gbit "), Ok(1_000_000_000));
    }

    #[test]
    fn rate_mistakes() {
        for bad in ["10Gbps", "10gbps", "10Bps", "10mbps", "1bps"] {
            let e = parse_rate(bad).unwrap_err();
            assert!(
                e.contains("bytes per second") && e.contains("factor-of-8"),
                "{e}"
            );
        }
        // The hint keeps the magnitude the user wrote: both readings, never 1000x off.
        let e = parse_rate("100Mbps").unwrap_err();
        assert!(e.contains("`100Mbit`") && e.contains("`800Mbit`"), "{e}");
        let e = parse_rate("5kbps").unwrap_err();
        assert!(e.contains("`5kbit`") && e.contains("`40kbit`"), "{e}");
        let e = parse_rate("2.5Gb/s").unwrap_err();
        assert!(e.contains("`2.5Gbit`") && e.contains("`20Gbit`"), "{e}");
        assert!(parse_rate("10").unwrap_err().contains("Mbit"));
        assert!(parse_rate("10GB").unwrap_err().contains("unknown"));
        assert!(parse_rate("").unwrap_err().contains("empty"));
        assert!(parse_rate("-1Gbit").unwrap_err().contains("negative"));
        assert!(parse_rate("NaNGbit").is_err());
        assert!(parse_rate("infGbit").is_err());
        assert!(parse_rate("1.2.3Gbit").is_err());
        assert!(parse_rate("Gbit").is_err());
        assert!(parse_rate(".Gbit").is_err());
        assert!(
            parse_rate("99999999999Tbit")
                .unwrap_err()
                .contains("too large")
        );
        assert!(parse_rate("0.5bit").unwrap_err().contains("whole"));
    }

    #[test]
    fn sizes_and_times() {
        assert_eq!(parse_size("1500B"), Ok(1500));
        assert_eq!(parse_size("64KiB"), Ok(65536));
        assert_eq!(parse_size("4MB"), Ok(4_000_000));
        assert_eq!(parse_size("1GiB"), Ok(1 << 30));
        assert!(parse_size("1500").unwrap_err().contains("KiB"));
        assert!(parse_size("1500b").is_err());
        assert!(parse_size("1.5B").is_err());
        assert_eq!(parse_time("500ms"), Ok(500_000_000));
        assert_eq!(parse_time("15s"), Ok(15_000_000_000));
        assert_eq!(parse_time("20us"), Ok(20_000));
        assert_eq!(parse_time("7ns"), Ok(7));
        assert!(parse_time("15").unwrap_err().contains("ms"));
        assert!(parse_time("1h").is_err());
    }

    #[test]
    fn formatting() {
        assert_eq!(format_rate(2.5e9), "2.5Gbit");
        assert_eq!(format_rate(5e8), "500Mbit");
        assert_eq!(format_rate(0.0), "0bit");
        assert_eq!(format_rate(1234.0), "1.234kbit");
        assert_eq!(format_rate(999_999_999.9), "1Gbit");
        assert_eq!(format_rate(f64::INFINITY), "inf");
        assert_eq!(format_size(1500), "1500B");
        assert_eq!(format_size(65536), "64KiB");
        assert_eq!(format_size(16_000_000), "16MB");
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_time(500_000_000), "500ms");
        assert_eq!(format_time(15_000_000_000), "15s");
        assert_eq!(format_time(1), "1ns");
    }

    #[test]
    fn formats_parse_back() {
        for bytes in [
            0,
            1,
            999,
            1000,
            1024,
            1500,
            65536,
            123_456_789,
            u64::MAX / 1024,
        ] {
            assert_eq!(parse_size(&format_size(bytes)), Ok(bytes));
        }
        for ns in [1, 1000, 1_500_000, 15_000_000_000] {
            assert_eq!(parse_time(&format_time(ns)), Ok(ns));
        }
    }
}
