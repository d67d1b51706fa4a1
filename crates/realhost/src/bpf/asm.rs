//! eBPF instructions, assembled by nicsched from the policy: a program is built in
//! Rust at run time, so nothing needs clang or a BPF object file, and the README's
//! commands run on a machine without either. The kernel's verifier checks what is
//! built here before it runs.
//!
//! [`Asm`] appends instructions and resolves jumps to [`Label`]s when it finishes.

/// One instruction as the kernel reads it (`struct bpf_insn`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    code: u8,
    /// Destination register in the low nibble, source in the high one.
    regs: u8,
    off: i16,
    imm: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reg {
    R0 = 0,
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    R8,
    R9,
    /// The frame pointer, read-only: the stack lies below it.
    R10,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    B = 0x10,
    H = 0x08,
    W = 0x00,
    DW = 0x18,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Alu {
    Add = 0x00,
    Sub = 0x10,
    Mul = 0x20,
    Div = 0x30,
    Or = 0x40,
    And = 0x50,
    Lsh = 0x60,
    Rsh = 0x70,
    Mod = 0x90,
    Xor = 0xa0,
    Mov = 0xb0,
}

/// Jump conditions; the comparisons are unsigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    Eq = 0x10,
    Gt = 0x20,
    Ge = 0x30,
    Set = 0x40,
    Ne = 0x50,
    Lt = 0xa0,
    Le = 0xb0,
}

/// The kernel helpers nicsched's programs call (`enum bpf_func_id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Helper {
    MapLookupElem = 1,
    Redirect = 23,
    SkbLoadBytes = 26,
}

const CLASS_LD: u8 = 0x00;
const CLASS_LDX: u8 = 0x01;
const CLASS_ST: u8 = 0x02;
const CLASS_STX: u8 = 0x03;
const CLASS_JMP: u8 = 0x05;
const CLASS_ALU64: u8 = 0x07;
const MODE_IMM: u8 = 0x00;
const MODE_MEM: u8 = 0x60;
const MODE_ATOMIC: u8 = 0xc0;
const SOURCE_REG: u8 = 0x08;
const JUMP_ALWAYS: u8 = 0x00;
const CALL: u8 = 0x80;
const EXIT: u8 = 0x90;
/// `src_reg` of a 64-bit immediate load that the kernel replaces by a map's address.
const PSEUDO_MAP_FD: u8 = 1;
/// `imm` of an atomic instruction: add, fetching nothing.
const ATOMIC_ADD: i32 = 0x00;
/// `BPF_FETCH`: the atomic instruction also puts the old value in its source.
const ATOMIC_FETCH: i32 = 0x01;

/// A place in the program that jumps name before it is known.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Label(usize);

/// A program being assembled.
#[derive(Default)]
pub struct Asm {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    jumps: Vec<(usize, Label)>,
}

impl Asm {
    pub fn new() -> Asm {
        Asm::default()
    }

    fn push(&mut self, code: u8, dst: Reg, src: Reg, off: i16, imm: i32) {
        self.insns.push(Insn {
            code,
            regs: (dst as u8) | ((src as u8) << 4),
            off,
            imm,
        });
    }

    /// Instructions so far (a map load takes two).
    pub fn len(&self) -> usize {
        self.insns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.insns.is_empty()
    }

    pub fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Puts `label` at the next instruction.
    pub fn bind(&mut self, label: Label) {
        debug_assert!(self.labels[label.0].is_none(), "a label is bound once");
        self.labels[label.0] = Some(self.insns.len());
    }

    /// `dst = dst OP imm` on 64 bits (`Alu::Mov`: `dst = imm`, sign-extended).
    pub fn alu_imm(&mut self, op: Alu, dst: Reg, imm: i32) {
        self.push(CLASS_ALU64 | op as u8, dst, Reg::R0, 0, imm);
    }

    /// `dst = dst OP src` on 64 bits.
    pub fn alu_reg(&mut self, op: Alu, dst: Reg, src: Reg) {
        self.push(CLASS_ALU64 | op as u8 | SOURCE_REG, dst, src, 0, 0);
    }

    /// `dst = *(size *)(src + off)`, zero-extended.
    pub fn load(&mut self, size: Size, dst: Reg, src: Reg, off: i16) {
        self.push(CLASS_LDX | MODE_MEM | size as u8, dst, src, off, 0);
    }

    /// `*(size *)(dst + off) = src`.
    pub fn store(&mut self, size: Size, dst: Reg, off: i16, src: Reg) {
        self.push(CLASS_STX | MODE_MEM | size as u8, dst, src, off, 0);
    }

    /// `*(size *)(dst + off) = imm`.
    pub fn store_imm(&mut self, size: Size, dst: Reg, off: i16, imm: i32) {
        self.push(CLASS_ST | MODE_MEM | size as u8, dst, Reg::R0, off, imm);
    }

    /// `*(u64 *)(dst + off) += src`, atomically: a counter every CPU adds to.
    pub fn atomic_add(&mut self, dst: Reg, off: i16, src: Reg) {
        self.push(
            CLASS_STX | MODE_ATOMIC | Size::DW as u8,
            dst,
            src,
            off,
            ATOMIC_ADD,
        );
    }

    /// `src = *(u64 *)(dst + off)`, then `*(u64 *)(dst + off) += ` the old `src`,
    /// atomically: a position every CPU takes the next of.
    pub fn atomic_fetch_add(&mut self, dst: Reg, off: i16, src: Reg) {
        self.push(
            CLASS_STX | MODE_ATOMIC | Size::DW as u8,
            dst,
            src,
            off,
            ATOMIC_ADD | ATOMIC_FETCH,
        );
    }

    /// `dst = ` the map whose file descriptor is `map_fd` (two instruction slots).
    pub fn load_map(&mut self, dst: Reg, map_fd: i32) {
        self.insns.push(Insn {
            code: CLASS_LD | MODE_IMM | Size::DW as u8,
            regs: (dst as u8) | (PSEUDO_MAP_FD << 4),
            off: 0,
            imm: map_fd,
        });
        self.insns.push(Insn {
            code: 0,
            regs: 0,
            off: 0,
            imm: 0,
        });
    }

    /// Jumps to `to` when `dst COND imm`.
    pub fn jump_imm(&mut self, cond: Cond, dst: Reg, imm: i32, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.push(CLASS_JMP | cond as u8, dst, Reg::R0, 0, imm);
    }

    /// Jumps to `to` when `dst COND src`.
    pub fn jump_reg(&mut self, cond: Cond, dst: Reg, src: Reg, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.push(CLASS_JMP | cond as u8 | SOURCE_REG, dst, src, 0, 0);
    }

    pub fn goto(&mut self, to: Label) {
        self.jumps.push((self.insns.len(), to));
        self.push(CLASS_JMP | JUMP_ALWAYS, Reg::R0, Reg::R0, 0, 0);
    }

    /// Calls `helper` with R1-R5; its result is in R0, and R1-R5 are lost.
    pub fn call(&mut self, helper: Helper) {
        self.push(CLASS_JMP | CALL, Reg::R0, Reg::R0, 0, helper as i32);
    }

    /// Returns R0.
    pub fn exit(&mut self) {
        self.push(CLASS_JMP | EXIT, Reg::R0, Reg::R0, 0, 0);
    }

    /// The program, every jump pointing at its label.
    ///
    /// # Panics
    /// On a jump to a label never bound, or farther than a jump reaches: both are
    /// mistakes in the code that builds the program, not in its input.
    pub fn finish(mut self) -> Vec<Insn> {
        for &(at, label) in &self.jumps {
            let target = self.labels[label.0].expect("every label jumped to is bound");
            let off = target as isize - (at as isize + 1);
            self.insns[at].off = i16::try_from(off).expect("a jump within 32k instructions");
        }
        self.insns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instructions_are_encoded_as_the_kernel_reads_them() {
        let mut asm = Asm::new();
        let done = asm.label();
        asm.alu_imm(Alu::Mov, Reg::R0, 7);
        asm.jump_imm(Cond::Eq, Reg::R1, 0x0008, done);
        asm.load(Size::W, Reg::R2, Reg::R1, 16);
        asm.store_imm(Size::W, Reg::R10, -24, 32);
        asm.atomic_add(Reg::R0, 8, Reg::R3);
        asm.atomic_fetch_add(Reg::R8, 0, Reg::R1);
        asm.alu_reg(Alu::Mod, Reg::R1, Reg::R2);
        asm.bind(done);
        asm.exit();
        let insns = asm.finish();
        let raw: Vec<(u8, u8, i16, i32)> = insns
            .iter()
            .map(|i| (i.code, i.regs, i.off, i.imm))
            .collect();
        assert_eq!(
            raw,
            [
                (0xb7, 0x00, 0, 7),      // r0 = 7
                (0x15, 0x01, 5, 0x0008), // if r1 == 8 goto +5
                (0x61, 0x12, 16, 0),     // r2 = *(u32 *)(r1 + 16)
                (0x62, 0x0a, -24, 32),   // *(u32 *)(r10 - 24) = 32
                (0xdb, 0x30, 8, 0),      // lock *(u64 *)(r0 + 8) += r3
                (0xdb, 0x18, 0, 1),      // r1 = atomic_fetch_add((u64 *)(r8 + 0), r1)
                (0x9f, 0x21, 0, 0),      // r1 %= r2
                (0x95, 0x00, 0, 0),      // exit
            ]
        );
    }

    #[test]
    fn a_map_load_takes_two_slots_and_backward_jumps_are_negative() {
        let mut asm = Asm::new();
        let top = asm.label();
        asm.bind(top);
        asm.load_map(Reg::R1, 5);
        asm.goto(top);
        let insns = asm.finish();
        assert_eq!(insns.len(), 3);
        assert_eq!(
            (insns[0].code, insns[0].regs, insns[0].imm),
            (0x18, 0x11, 5)
        );
        assert_eq!((insns[2].code, insns[2].off), (0x05, -3));
    }
}
