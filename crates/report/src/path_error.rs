use std::io;
use std::path::Path;

/// `error` with the path it happened at in front: "No space left on device" alone
/// does not say which file is missing.
pub(crate) fn at(path: &Path) -> impl FnOnce(io::Error) -> io::Error + '_ {
    move |error| io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}
