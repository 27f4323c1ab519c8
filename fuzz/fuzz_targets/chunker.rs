#![no_main]
//! Chunks reproduce the text exactly, never split a character, respect pages.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let target = 64 + (data[0] as usize) * 4;
    let text = String::from_utf8_lossy(&data[1..]);
    // Page starts derived from the input, snapped to character boundaries.
    let mut pages = vec![0];
    for (i, _) in text.char_indices().filter(|(_, c)| *c == '\u{c}') {
        pages.push(i);
    }
    let spans = rlm_corpus::chunk_text(&text, target, Some(&pages), data[0] % 2 == 0);
    let joined: String = spans.iter().map(|s| &text[s.byte_start..s.byte_end]).collect();
    assert_eq!(joined, text);
});
