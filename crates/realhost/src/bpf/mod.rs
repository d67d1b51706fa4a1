//! BPF without clang: nicsched assembles its programs from the policy
//! ([`asm`]), loads them and the maps they read with bpf(2) ([`sys`]), and attaches
//! them at a device's egress through tcx links. A link held in the process detaches
//! when the process ends, however it ends; a pinned one stays until its pin is
//! removed.
//!
//! - [`tenants`]: a frame's tenant by its source address, in the kernel;
//! - [`tonic`]: TONIC's queue pools and priority band, in a program pinned at a
//!   device's egress (`apply --mechanism tonic`);
//! - [`Redirect`]: every tenant's frame taken from a device's egress to another
//!   device (`nicsched enforce`'s engine reads them there).

pub mod asm;
pub mod sys;
pub mod tenants;
pub mod tonic;

use crate::Error;
use asm::{Alu, Asm, Helper, Reg};
use policy::Policy;
use sys::{Link, Program};
use tenants::TenantMaps;

/// While alive, DEV's egress sends every frame whose source a tenant's
/// `match.src` holds to another device's egress instead (`bpf_redirect`); the rest
/// (ARP, the host's own traffic) goes on to DEV's qdisc untouched.
#[derive(Debug)]
pub struct Redirect {
    _link: Link,
    _program: Program,
    _tenants: TenantMaps,
}

impl Redirect {
    pub fn attach(policy: &Policy, dev_ifindex: u32, to_ifindex: u32) -> Result<Redirect, Error> {
        let kernel =
            |what: &str, e: &dyn std::fmt::Display| Error::Failed(format!("cannot {what}: {e}"));
        let tenants = TenantMaps::of(policy)
            .map_err(|e| kernel("create the BPF maps of the tenants' prefixes", &e))?;
        let mut asm = Asm::new();
        let pass = asm.label();
        asm.alu_reg(Alu::Mov, Reg::R6, Reg::R1);
        tenants.emit_tenant_of_source(&mut asm, pass);
        asm.alu_imm(Alu::Mov, Reg::R1, to_ifindex as i32);
        asm.alu_imm(Alu::Mov, Reg::R2, 0);
        asm.call(Helper::Redirect);
        asm.exit();
        asm.bind(pass);
        asm.alu_imm(Alu::Mov, Reg::R0, tenants::PASS);
        asm.exit();
        let program = Program::load_tc("nicsched_redir", &asm.finish())
            .map_err(|e| kernel("load the redirect program", &e))?;
        let link = Link::tcx_egress(&program, dev_ifindex).map_err(|e| {
            kernel(
                "attach at the device's egress (tcx needs Linux 6.6 or later)",
                &e,
            )
        })?;
        Ok(Redirect {
            _link: link,
            _program: program,
            _tenants: tenants,
        })
    }
}
