#![no_main]
//! Office files, e-books, mail and archives: any bytes under each name
//! give text, members, a skip or a failure, never a panic out of the call.
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    for name in [
        "f.docx", "f.xlsx", "f.xls", "f.pptx", "f.odt", "f.ods", "f.odp", "f.rtf", "f.epub",
        "f.eml", "f.mbox", "f.zip",
    ] {
        let _ = rlm_corpus::extract::extract(Path::new(name), data);
    }
});
