"""vflsec.mpc.engine: SPU's protocols with their threat models, shares on the wire, compiled programs."""
import numpy as np
import pytest

from vflsec.mpc import engine
from vflsec.mpc.links import InMemoryLinks, LinkProvider, current_links, use_links

spu = pytest.importorskip("spu")


@pytest.mark.parametrize("name, fits, refused", [("cheetah", [2], [1, 3]), ("aby3", [3], [2, 4]),
                                                  ("semi2k", [2, 3, 5], [1])])
def test_each_protocol_runs_between_its_number_of_parties_and_names_one_that_fits(name, fits, refused):
    protocol = engine.get_mpc_protocol(name)
    for n in fits:
        protocol.check_parties(n)
    for n in refused:
        with pytest.raises(ValueError, match=rf"mpc_protocol '{name}' runs between .* parties, the job has {n}"):
            protocol.check_parties(n)
    with pytest.raises(ValueError, match=r"the job has 3 -- use mpc_protocol 'aby3' or 'semi2k'"):
        engine.get_mpc_protocol("cheetah").check_parties(3)


def test_every_protocol_states_its_threat_model_and_semi2k_its_dealer():
    for protocol in engine.MPC_PROTOCOLS.values():
        assert "semi-honest" in protocol.threat_model
    assert engine.get_mpc_protocol("semi2k").trusted_dealer
    assert "deals every Beaver triple" in engine.get_mpc_protocol("semi2k").threat_model
    assert not engine.get_mpc_protocol("cheetah").trusted_dealer


@pytest.mark.parametrize("bad", ["spdz", None, 3])
def test_an_unknown_protocol_is_refused_listing_them(bad):
    with pytest.raises(ValueError, match=r"mpc_protocol must be one of \['aby3', 'cheetah', 'semi2k'\]"):
        engine.get_mpc_protocol(bad)


@pytest.mark.parametrize("bits", [7, 27, 18.0, True])
def test_fraction_bits_outside_the_ring_are_refused(bits):
    with pytest.raises(ValueError, match="fraction_bits must be an int in"):
        engine.runtime_config(engine.get_mpc_protocol("semi2k"), fraction_bits=bits)


def test_a_share_survives_the_wire_and_two_shares_reconstruct_the_value():
    io = spu.Io(2, engine.runtime_config(engine.get_mpc_protocol("semi2k")))
    value = np.array([[1.5, -2.25], [1e-3, 3e4]])
    shares = engine.make_shares(io, value)
    wire = [engine.share_to_wire(s) for s in shares]
    assert all(isinstance(part, bytes) for parts in wire for part in parts)
    back = engine.reconstruct(io, [engine.share_from_wire(parts) for parts in wire])
    np.testing.assert_allclose(back, value, atol=2.0 ** -engine.FRACTION_BITS)
    # one share alone is not the value (a random ring element per entry)
    assert wire[0] != engine.share_to_wire(engine.make_shares(io, value)[0])


@pytest.mark.parametrize("bad", [b"x", [], ["meta"], [b"a", 3]])
def test_a_share_that_is_not_a_list_of_bytes_is_refused(bad):
    with pytest.raises(ValueError, match="a share on the wire is a non-empty list of bytes"):
        engine.share_from_wire(bad)


def test_each_party_compiles_the_same_program_from_public_shapes():
    def double(a, b):
        return (a * 2.0 + b,)

    shapes = [("a", (3,), "float64", True), ("b", (3,), "float64", False)]
    first, second = engine.compile_program(double, shapes, ["a"]), engine.compile_program(double, shapes, ["a"])
    assert first.digest == second.digest and first.input_names == ("a", "b") and first.output_names == ("a",)
    other = engine.compile_program(double, [("a", (4,), "float64", True), ("b", (4,), "float64", False)], ["a"])
    assert other.digest != first.digest


def test_links_are_the_process_choice_and_come_back_after_the_block():
    class Recorder(InMemoryLinks):
        pass

    before = current_links()
    with use_links(Recorder()) as chosen:
        assert current_links() is chosen
    assert current_links() is before
    with pytest.raises(TypeError, match="provider must be a LinkProvider"):
        with use_links("mem"):
            pass
    assert isinstance(before, LinkProvider)
