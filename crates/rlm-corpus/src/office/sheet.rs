//! Spreadsheets (`.xlsx`, `.xls`, `.ods`) through calamine: each sheet a
//! place of its own, its name a `#` heading, its first non-empty row the
//! header, and every later row one line with each value named by its
//! column (`Region: North | Q3: 1200`), recorded with its row number so
//! a citation names the rows it quotes (`sheet "Q3", rows 10–14`).

use std::io::Cursor;

use calamine::{Data, Reader, Sheets, open_workbook_auto_from_rs, open_workbook_from_rs};

use super::package::Package;
use super::{DocText, Refusal, named_cells};
use crate::chunk::Place;
use crate::extracted::{DocKind, Extracted, SkipReason};

/// The text of a workbook of `kind`.
pub(super) fn extract(bytes: &[u8], kind: DocKind) -> Result<Extracted, Refusal> {
    if kind != DocKind::Xls {
        // calamine inflates the package's parts without limits of its own:
        // every part is inflated once under ours first.
        let mut package = match kind {
            DocKind::Xlsx => super::docx::open_ooxml(bytes)?,
            _ => Package::open(bytes)?,
        };
        if package.has("META-INF/manifest.xml")
            && let Some(manifest) = package.read_text("META-INF/manifest.xml")?
            && manifest.contains("encryption-data")
        {
            return Err(Refusal::Skip(SkipReason::Encrypted));
        }
        package.check_all()?;
    }
    let refusal = |e: calamine::Error| match e {
        calamine::Error::Xls(calamine::XlsError::Password)
        | calamine::Error::Ods(calamine::OdsError::Password) => {
            Refusal::Skip(SkipReason::Encrypted)
        }
        other => Refusal::Corrupt(other.to_string()),
    };
    let cursor = Cursor::new(bytes);
    // Read as the format the name says, so that the error says what is
    // wrong with it; `.xlsb` (named as XLSX here) is told apart by calamine.
    let mut workbook: Sheets<_> = match kind {
        DocKind::Xls => Sheets::Xls(
            open_workbook_from_rs(cursor).map_err(|e| refusal(calamine::Error::Xls(e)))?,
        ),
        DocKind::Ods => Sheets::Ods(
            open_workbook_from_rs(cursor).map_err(|e| refusal(calamine::Error::Ods(e)))?,
        ),
        _ => match open_workbook_from_rs(cursor.clone()) {
            Ok(xlsx) => Sheets::Xlsx(xlsx),
            Err(e) => {
                open_workbook_auto_from_rs(cursor).map_err(|_| refusal(calamine::Error::Xlsx(e)))?
            }
        },
    };
    let mut out = DocText::new();
    for name in workbook.sheet_names() {
        let range = match workbook.worksheet_range(&name) {
            Ok(range) => range,
            // A chart sheet or a dialog sheet holds no cells.
            Err(_) => continue,
        };
        let first_row = range.start().map_or(0, |(row, _)| row);
        out.start(Place::Sheet {
            name: name.clone(),
            rows: Vec::new(),
        });
        out.line(&format!("# {name}"));
        let mut header: Option<Vec<String>> = None;
        for (i, row) in range.rows().enumerate() {
            let cells: Vec<String> = row.iter().map(cell_text).collect();
            if cells.iter().all(|c| c.is_empty()) {
                continue;
            }
            let number = first_row + i as u32 + 1;
            match &header {
                None => {
                    let line = cells.iter().map(|c| c.as_str()).collect::<Vec<_>>();
                    out.row(number, &format!("| {} |", line.join(" | ")));
                    header = Some(cells);
                }
                Some(h) => out.row(number, &named_cells(h, &cells)),
            }
        }
        out.blank();
    }
    Ok(out.finish(kind, None))
}

/// A cell as text: numbers without a needless `.0`, dates as ISO dates.
fn cell_text(cell: &Data) -> String {
    match cell {
        Data::DateTime(d) if d.is_datetime() => excel_date(d.as_f64()),
        Data::Float(f) if f.fract() == 0.0 && f.abs() < 1e15 => format!("{}", *f as i64),
        other => other.to_string().trim().to_string(),
    }
}

/// An Excel serial date (days since 1899-12-30, the fraction the time of
/// day) as `YYYY-MM-DD` or `YYYY-MM-DD HH:MM`.
fn excel_date(serial: f64) -> String {
    if !serial.is_finite() || !(0.0..2_958_466.0).contains(&serial) {
        return serial.to_string();
    }
    let days = serial.floor() as i64;
    let minutes = ((serial - serial.floor()) * 1440.0).round() as i64;
    // Days from 1970-01-01 of 1899-12-30.
    let (y, m, d) = civil_from_days(days - 25_569);
    if minutes == 0 {
        format!("{y:04}-{m:02}-{d:02}")
    } else {
        format!(
            "{y:04}-{m:02}-{d:02} {:02}:{:02}",
            minutes / 60 % 24,
            minutes % 60
        )
    }
}

/// The proleptic Gregorian date of `days` since 1970-01-01.
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_dates_become_iso_dates() {
        assert_eq!(excel_date(45_353.0), "2024-03-02");
        assert_eq!(excel_date(45_353.5), "2024-03-02 12:00");
        assert_eq!(civil_from_days(0), (1970, 1, 1));
    }

    #[test]
    fn whole_numbers_have_no_fraction() {
        assert_eq!(cell_text(&Data::Float(1200.0)), "1200");
        assert_eq!(cell_text(&Data::Float(12.5)), "12.5");
        assert_eq!(cell_text(&Data::String(" Nord ".into())), "Nord");
    }
}
