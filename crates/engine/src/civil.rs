//! Calendar dates from Unix time (UTC, proleptic Gregorian calendar), for the
//! TIME_* variables, the audit log's time stamps and directory names, and the
//! server's log lines: one implementation for the whole project.

/// A Unix time broken down into its UTC calendar fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UtcTime {
    /// The year, e.g. 2026.
    pub year: i64,
    /// The month, 1 to 12.
    pub month: u32,
    /// The day of the month, 1 to 31.
    pub day: u32,
    /// The hour, 0 to 23.
    pub hour: u32,
    /// The minute, 0 to 59.
    pub minute: u32,
    /// The second, 0 to 59.
    pub second: u32,
    /// The day of the week, 0 (Sunday) to 6.
    pub weekday: u32,
}

impl UtcTime {
    /// The calendar fields of `unix_secs` seconds since 1970-01-01 00:00:00 UTC.
    pub fn from_unix(unix_secs: i64) -> UtcTime {
        let days = unix_secs.div_euclid(86_400);
        let sod = unix_secs.rem_euclid(86_400) as u32;
        let (year, month, day) = civil_from_days(days);
        UtcTime {
            year,
            month,
            day,
            hour: sod / 3600,
            minute: (sod / 60) % 60,
            second: sod % 60,
            // 1970-01-01 was a Thursday.
            weekday: (days + 4).rem_euclid(7) as u32,
        }
    }

    /// The month's English three-letter abbreviation (`Jan` to `Dec`).
    pub fn month_abbrev(&self) -> &'static str {
        const NAMES: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        NAMES[(self.month.clamp(1, 12) - 1) as usize]
    }
}

/// Converts days since 1970-01-01 to a (year, month, day) date (the era-based
/// algorithm: 400-year eras of 146,097 days, years starting in March).
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_723), (2024, 1, 1));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
        let t = UtcTime::from_unix(1_795_000_000);
        // 2026-11-18 11:06:40 UTC, a Wednesday.
        assert_eq!(
            (
                t.year, t.month, t.day, t.hour, t.minute, t.second, t.weekday
            ),
            (2026, 11, 18, 11, 6, 40, 3)
        );
        assert_eq!(t.month_abbrev(), "Nov");
    }
}
