"""vflsec.he imports each scheme lazily: Paillier works without TenSEAL (issue 25, item 3).

Each check runs in a fresh interpreter. Where TenSEAL must be missing, a
meta-path finder installed before anything else refuses ``tenseal`` (and its
native module) the way a missing package does; the script first proves the
block holds, so the test cannot pass with TenSEAL silently importable.
"""
from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]  # tests/he/ -> the checkout
HE_DIR = ROOT / "python" / "vflsec" / "he"

BLOCKER = textwrap.dedent("""
    import importlib.abc
    import json
    import sys

    BLOCKED = {blocked!r}

    class Unimportable(importlib.abc.MetaPathFinder):
        def find_spec(self, fullname, path=None, target=None):
            if fullname.split(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{fullname!r}} (made unimportable by the test)",
                                          name=fullname)
            return None

    sys.meta_path.insert(0, Unimportable())
    for name in BLOCKED:
        try:
            __import__(name)
        except ImportError:
            pass
        else:
            raise SystemExit(f"the test's blocker failed: {{name}} imported")

    def refusal(action):
        '''The ImportError ``action`` raises, as a dict (None if it raises none).'''
        try:
            action()
        except ImportError as exc:
            return {{"type": type(exc).__name__, "name": exc.name, "message": str(exc)}}
        return None
""")


def _run(script: str, blocked=()) -> dict:
    """Run ``script`` (after the blocker of ``blocked``) in a fresh interpreter;
    its last stdout line is a JSON object."""
    source = BLOCKER.format(blocked=tuple(blocked)) + textwrap.dedent(script)
    result = subprocess.run([sys.executable, "-c", source], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.slow  # a python subprocess
def test_plain_imports_load_no_he_backend():
    pytest.importorskip("tenseal")  # installed: the imports below must still not load it
    out = _run("""
        import vflsec, vflsec.glm, vflsec.glm.taylor
        after_glm = sorted(m for m in ("tenseal", "phe", "gmpy2") if m in sys.modules)
        import vflsec.he, vflsec.he.scheme, vflsec.he.vector, vflsec.glm.he_vfl
        after_he = sorted(m for m in ("tenseal", "phe", "gmpy2") if m in sys.modules)
        import vflsec.he.paillier, vflsec.glm.paillier
        after_paillier = sorted(m for m in ("tenseal", "phe", "gmpy2") if m in sys.modules)
        import vflsec.he.ckks
        print(json.dumps({"glm": after_glm, "he": after_he, "paillier": after_paillier,
                          "ckks": "tenseal" in sys.modules}))
    """)
    assert out["glm"] == [] and out["he"] == []
    assert out["paillier"] == ["gmpy2", "phe"]
    assert out["ckks"]  # the control: importing CKKS does load TenSEAL here


@pytest.mark.slow  # a python subprocess
def test_paillier_and_its_protocol_work_without_tenseal():
    pytest.importorskip("phe")
    pytest.importorskip("gmpy2")
    out = _run("""
        import warnings
        import numpy as np

        import vflsec, vflsec.glm
        from vflsec import he
        from vflsec.he import paillier as P
        from vflsec.glm import GLMJob, PartyData, available_protocols, get_protocol, run_job
        from vflsec.glm import he_vfl  # the HE-VFL flow and its scheme interface, TenSEAL-free

        he.set_num_processes(1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", he.WeakKeyWarning)
            pk, sk = he.generate_keypair(2048)
        values = np.array([0.5, -1.25, 3.0])
        enc = pk.encrypt(values)
        back = he.EncryptedVector.from_bytes(pk, enc.to_bytes())
        scaled = back * 3.0

        rng = np.random.default_rng(0)
        Xa, Xb = rng.uniform(-0.3, 0.3, (24, 2)), rng.uniform(-0.3, 0.3, (24, 3))
        y = np.where(rng.uniform(size=24) < 0.5, -1.0, 1.0)
        coefs = {}
        for protocol in ("paillier", "taylor"):  # "taylor": the same flow in the clear
            job = GLMJob(protocol=protocol, n_samples=24, batch_size=8, epochs=1, lr=1.0, k=10.0,
                         passives=("passive",), coordinator="coordinator", key_bits=2048)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", he.WeakKeyWarning)
                result = run_job(job, {"active": PartyData(Xa, y), "passive": PartyData(Xb)}, timeout=300)
            coefs[protocol] = [result.results[p].coef.tolist() for p in ("active", "passive")]
            if protocol == "paillier":
                info = result.results["coordinator"].info

        ckks_names = {
            "import vflsec.he.ckks": refusal(lambda: __import__("vflsec.he.ckks")),
            "from vflsec.he import CKKSSecretContext": refusal(lambda: he.CKKSSecretContext),
            "vflsec.he.ckks (attribute)": refusal(lambda: he.ckks),
            "import vflsec.he._ckks_diagonal": refusal(lambda: __import__("vflsec.he._ckks_diagonal")),
            "import vflsec.he._ckks_per_column": refusal(lambda: __import__("vflsec.he._ckks_per_column")),
            "import vflsec.glm.ckks": refusal(lambda: __import__("vflsec.glm.ckks")),
            "get_protocol('ckks')": refusal(lambda: get_protocol("ckks")),
        }
        from vflsec.errors import missing_module
        try:
            import vflsec.he.ckks  # noqa: F401
        except ImportError as exc:
            cli_line = str(missing_module(exc))
        print(json.dumps({
            "decrypted": sk.decrypt(back).tolist(), "scaled": sk.decrypt(scaled).tolist(),
            "scaled_level": scaled.level, "coefs": coefs, "info": info,
            "available": list(available_protocols()), "ckks": ckks_names, "cli": cli_line,
            "loaded": sorted(m for m in sys.modules if m.split(".")[0] == "tenseal"),
        }))
    """, blocked=("tenseal", "_tenseal_cpp"))
    np.testing.assert_allclose(out["decrypted"], [0.5, -1.25, 3.0], atol=1e-12)
    np.testing.assert_allclose(out["scaled"], [1.5, -3.75, 9.0], atol=1e-11)
    assert out["scaled_level"] == 2
    # The Paillier run trained: its weights move off zero and equal the plaintext flow's.
    paillier, taylor = out["coefs"]["paillier"], out["coefs"]["taylor"]
    assert any(abs(w) > 1e-3 for block in paillier for w in block)
    for got, want in zip(paillier, taylor):
        np.testing.assert_allclose(got, want, atol=1e-8)
    assert out["info"]["scheme"] == "paillier" and out["info"]["key_bits"] == 2048
    assert "paillier" in out["available"] and "taylor" in out["available"] and "ckks" not in out["available"]
    for entry, refusal in out["ckks"].items():
        assert refusal is not None, f"{entry} did not raise ImportError without TenSEAL"
        assert refusal["type"] == "ModuleNotFoundError" and refusal["name"] == "tenseal", (entry, refusal)
        assert 'pip install "vflsec[he]"' in refusal["message"] and "CKKS" in refusal["message"], (entry, refusal)
    assert "'tenseal' is not installed" in out["cli"] and "he" in out["cli"]
    assert out["loaded"] == []


@pytest.mark.slow  # a python subprocess
def test_paillier_without_phe_names_its_extra_and_the_rest_still_imports():
    out = _run("""
        import vflsec, vflsec.glm, vflsec.he
        from vflsec.glm import get_protocol
        get_protocol("taylor")  # the HE-VFL flow in the clear needs no HE library
        print(json.dumps({
            "paillier": refusal(lambda: __import__("vflsec.he.paillier")),
            "lazy name": refusal(lambda: vflsec.he.generate_keypair),
            "protocol": refusal(lambda: get_protocol("paillier")),
        }))
    """, blocked=("phe", "gmpy2"))
    for entry, refusal in out.items():
        assert refusal is not None, entry
        assert refusal["name"] in ("phe", "gmpy2"), (entry, refusal)
        assert 'pip install "vflsec[paillier]"' in refusal["message"], (entry, refusal)


def test_he_imports_nothing_above_it():
    """he/ sits below glm/ (docs/ARCHITECTURE.md): none of its modules imports
    glm, splitnn, runtime, attacks, audit, bench or cli."""
    above = {"glm", "splitnn", "runtime", "attacks", "audit", "bench", "cli"}
    offending = []
    for path in sorted(HE_DIR.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom):
                parts = (node.module or "").split(".")
                # relative: level 1 is vflsec.he, level 2 is vflsec; absolute: vflsec.<package>
                target = parts[0] if node.level == 2 else (parts[1] if parts[0] == "vflsec" and len(parts) > 1
                                                           and node.level == 0 else None)
                names = [alias.name for alias in node.names] if node.level == 2 and not node.module else []
            elif isinstance(node, ast.Import):
                target, names = None, []
                for alias in node.names:
                    parts = alias.name.split(".")
                    if parts[0] == "vflsec" and len(parts) > 1:
                        target = parts[1]
            else:
                continue
            if target in above or above.intersection(names):
                offending.append(f"{path.name}:{node.lineno}")
    assert not offending, offending
    assert len(list(HE_DIR.glob("*.py"))) >= 10  # the scan saw the package
