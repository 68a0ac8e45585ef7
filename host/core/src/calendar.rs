//! Calendar words shared by the parts of capsaga that read dates in text:
//! the information-flow scanner (`flow::scan::date`) and the memory's time
//! phrases (`capsaga-memory`'s `when`).

/// The English month names, lower case, January first: index `m - 1` is
/// month `m`.
pub const MONTH_NAMES: [&str; 12] = [
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
];
