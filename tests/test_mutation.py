"""CI runs the mutation check: every deliberately broken variant of lightmod in
tests/mutation_check.py must be caught by the property tests meant for it, and those tests
must pass on the unbroken code."""
import io

import mutation_check


def test_every_mutant_is_caught():
    report = io.StringIO()
    results = mutation_check.check(out=report)
    assert results.pop("control"), "the tests fail without a mutant:\n" + report.getvalue()
    survived = sorted(name for name, caught in results.items() if not caught)
    assert not survived, "mutants not caught: %s\n%s" % (survived, report.getvalue())
    assert set(results) == set(mutation_check.BY_NAME)


def test_mutants_are_documented_and_target_existing_tests():
    import os

    from lightmod.testing import contract
    assert len(mutation_check.MUTANTS) >= 30
    for mutant in mutation_check.MUTANTS:
        assert mutant.doc
        assert mutant.properties or mutant.tests, mutant.name
        for name in mutant.properties:
            assert name in contract.BY_NAME, (mutant.name, name)
        for test in mutant.tests:
            path = test.split("::")[0]
            assert os.path.exists(os.path.join(mutation_check.ROOT, path)), test


def test_every_contract_property_has_a_mutant():
    """Each line of the contract is shown to matter: some planted bug breaks it."""
    from lightmod.testing import contract
    targeted = {name for mutant in mutation_check.MUTANTS for name in mutant.properties}
    assert set(contract.property_names()) <= targeted, \
        sorted(set(contract.property_names()) - targeted)
