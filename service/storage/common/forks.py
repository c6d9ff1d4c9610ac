"""Objects that keep state shared by a process's threads: a process forked from one has none of its threads, and
perhaps a lock one of them held, so each such object is reset in the child."""
import os
import weakref

# object -> the name of its method that resets it (a bound method would keep the object alive).
_resets = weakref.WeakKeyDictionary()


def reset_in_forked_child(instance, method_name):
    """Call `instance.<method_name>()` in every process forked from this one while `instance` lives."""
    _resets[instance] = method_name


os.register_at_fork(after_in_child=lambda: [getattr(instance, name)() for instance, name in list(_resets.items())])
