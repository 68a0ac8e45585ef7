use super::super::{Scan, scan_str};
use super::*;

fn scan(text: &str) -> Scan {
    let mut s = Scan::default();
    scan_str(text, &mut s);
    s
}

fn keys(text: &str, kind: Kind) -> Vec<String> {
    scan(text)
        .atoms
        .into_iter()
        .filter(|a| a.kind == kind)
        .map(|a| a.key)
        .collect()
}

fn shorts(text: &str) -> Vec<(String, Vec<String>)> {
    scan(text)
        .shorts
        .into_iter()
        .map(|n| (n.key, n.context))
        .collect()
}

#[test]
fn dates_in_every_usual_form_and_their_digits_are_not_numbers() {
    for (text, key) in [
        ("on 2024-05-13 at 10:30", "2024-05-13"),
        ("2024/05/13", "2024-05-13"),
        ("13.05.2024", "2024-05-13"),
        ("13 May 2024", "2024-05-13"),
        ("the 13th of May, 2024", "2024-05-13"),
        ("May 13, 2024", "2024-05-13"),
        ("Sept. 3 2024", "2024-09-03"),
        ("2024-05-13T10:30:00Z", "2024-05-13"),
    ] {
        assert!(keys(text, Kind::Date).contains(&key.to_string()), "{text}");
        assert!(shorts(text).is_empty(), "{text}: {:?}", shorts(text));
    }
    // Ambiguous: both readings.
    let k = keys("05/06/2024", Kind::Date);
    assert!(k.contains(&"2024-06-05".into()) && k.contains(&"2024-05-06".into()));
    // No year: no atom, and still no number 13.
    assert!(keys("on May 13", Kind::Date).is_empty());
    assert!(shorts("on May 13 and the 13th").is_empty());
}

#[test]
fn ibans_with_or_without_spaces_are_one_key() {
    let want = vec!["de89370400440532013000".to_string()];
    assert_eq!(
        keys("IBAN: DE89 3704 0044 0532 0130 00, thanks", Kind::Iban),
        want
    );
    assert_eq!(keys("iban DE89370400440532013000.", Kind::Iban), want);
    assert_eq!(keys("DE89-3704-0044-0532-0130-00", Kind::Iban), want);
    // Letters in the account part; a following word is not swallowed.
    assert_eq!(
        keys("GB29 NWBK 6016 1331 9268 19 then pay", Kind::Iban),
        vec!["gb29nwbk60161331926819".to_string()]
    );
    // Invalid checksum still an IBAN shape (AgentDojo's are not valid).
    assert_eq!(
        keys("send to UK12345678901234567890", Kind::Iban),
        vec!["uk12345678901234567890".to_string()]
    );
    // Its digits are not also a phone number.
    assert!(keys("DE89 3704 0044 0532 0130 00", Kind::Number).is_empty());
}

#[test]
fn numbers_amounts_and_phones() {
    assert_eq!(
        keys("total 1,000,000.00 EUR", Kind::Number),
        vec!["1000000"]
    );
    assert_eq!(keys("1.000.000,50 €", Kind::Number), vec!["1000000.5"]);
    assert_eq!(
        keys("call +1 (555) 123-4567 now", Kind::Number),
        vec!["15551234567"]
    );
    assert_eq!(keys("555-123-4567", Kind::Number), vec!["5551234567"]);
    assert_eq!(
        keys("0044 20 7946 0958", Kind::Number),
        vec!["00442079460958"]
    );
    assert_eq!(
        keys("account 0012345", Kind::Number),
        vec!["12345", "0012345"]
    );
    // A year and a count next to each other stay two short numbers.
    assert!(keys("in 2023 50 people", Kind::Number).is_empty());
    assert_eq!(shorts("in 2023 50 people").len(), 2);
    // 1,000.00 and 1000 and 1,000 are the same value; 1,000 may also be 1.
    let s = shorts("pay 1,000.00 EUR");
    assert_eq!(s, vec![("1000".to_string(), vec!["$".to_string()])]);
    let s = shorts("send 1,000 to Bob");
    assert!(
        s.iter().any(|(k, _)| k == "1000") && s.iter().any(|(k, _)| k == "1"),
        "{s:?}"
    );
    assert_eq!(shorts("12.50")[0].0, "12.5");
}

#[test]
fn short_numbers_keep_their_context_words() {
    let s = shorts("Please delete file 13 now");
    assert_eq!(s[0].0, "13");
    assert!(s[0].1.contains(&"file".to_string()), "{s:?}");
    let s = shorts("see issue #13");
    assert!(
        s[0].1.contains(&"id".to_string()) && s[0].1.contains(&"issue".to_string()),
        "{s:?}"
    );
    let s = shorts("No. 13");
    assert!(s[0].1.contains(&"id".to_string()), "{s:?}");
    let s = shorts("it costs $13");
    assert!(s[0].1.contains(&"$".to_string()), "{s:?}");
    // A sentence boundary stops the look-back.
    let s = shorts("Open the file. Room 13 is free");
    assert!(!s[0].1.contains(&"file".to_string()), "{s:?}");
    assert_eq!(
        name_words("file_id"),
        vec!["file".to_string(), "id".to_string()]
    );
    assert_eq!(
        name_words("recipientIban"),
        vec!["iban".to_string(), "recipient".to_string()]
    );
    assert_eq!(name_words("amount"), vec!["$".to_string()]);
}
