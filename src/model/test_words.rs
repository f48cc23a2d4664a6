//! A check the one-word kinds of the model share: each is written as its word and read back
//! from it, so that reports saved before a kind became an enum still merge.

use serde::de::DeserializeOwned;
use serde::Serialize;

/// Each of `words` is written as its word and read back from it; a word of none is refused.
pub fn round_trip<T: Serialize + DeserializeOwned + PartialEq + std::fmt::Debug>(
    words: &[(T, &str)],
) {
    for (k, word) in words {
        let json = serde_json::to_string(k).unwrap();
        assert_eq!(json, format!("\"{word}\""));
        assert_eq!(&serde_json::from_str::<T>(&json).unwrap(), k);
    }
    assert!(serde_json::from_str::<T>("\"no_such_word\"").is_err());
}
