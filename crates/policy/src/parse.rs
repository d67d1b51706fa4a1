use crate::{Policy, PolicyError, Scenario};
use std::path::Path;

pub fn load_policy(_path: &Path) -> Result<Policy, PolicyError> {
    unimplemented!()
}
pub fn parse_policy(_text: &str, _file: &str) -> Result<Policy, PolicyError> {
    unimplemented!()
}
pub fn load_scenario(_path: &Path) -> Result<Scenario, PolicyError> {
    unimplemented!()
}
pub fn parse_scenario(_text: &str, _file: &str, _base_dir: &Path) -> Result<Scenario, PolicyError> {
    unimplemented!()
}
