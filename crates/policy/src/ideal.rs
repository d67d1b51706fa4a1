use crate::Policy;

/// The fluid allocation for one set of demands, in bit/s.
#[derive(Clone, Debug, PartialEq)]
pub struct Allocation {
    pub tenant_bps: Vec<f64>,
    pub app_bps: Vec<f64>,
}

pub fn ideal_allocation(_policy: &Policy, _app_flow_demands_bps: &[Vec<f64>]) -> Allocation {
    unimplemented!()
}
