"""The error family: every condition has its own stable code, and the one table answers for each."""
from service import errors
from service.domain.validation import InvalidInput


def conditions():
    found, pending = [], [errors.ServiceError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def test_every_condition_has_its_own_code_with_a_status_and_a_graphql_code():
    classes = conditions()
    assert InvalidInput in classes and errors.StreamNotFound in classes
    codes = [cls.code for cls in classes]
    assert len(codes) == len(set(codes))
    assert set(codes) == set(errors.RESPONSES)
    for cls in classes:
        status, graphql_code = errors.RESPONSES[cls.code]
        assert 400 <= status <= 599 and graphql_code.isupper()


def test_the_table_decides_the_answers_of_both_sides():
    assert errors.http_status(errors.StreamNotFound()) == 404
    assert errors.http_status(errors.FileTooLarge("file of size 8.1MB is larger than 8MB")) == 413
    assert errors.graphql_code(errors.StorageFull()) == "INSUFFICIENT_STORAGE"
    assert errors.graphql_code(InvalidInput([("process.id", "is required")])) == "BAD_USER_INPUT"
