use crate::Policy;

pub fn parse_active(_policy: &Policy, _list: &str) -> Result<Vec<Vec<f64>>, String> {
    unimplemented!()
}
pub fn explain(_policy: &Policy, _app_flow_demands_bps: &[Vec<f64>]) -> String {
    unimplemented!()
}
