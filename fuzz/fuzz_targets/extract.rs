#![no_main]
//! Extraction of any bytes as PDF, HTML or text returns a value, never panics
//! out of the call (the PDF parser's own panics are caught and reported).
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    for name in ["f.pdf", "f.html", "f.md", "f.txt"] {
        let _ = rlm_corpus::extract::extract(Path::new(name), data);
    }
});
