"""How numbers and units read in words, for the pages and for the changes between revisions. Pure functions."""


def number(value):
    """A number as an engineer writes it: 10, not 10.0; 0.5; 1e-07 only where it must."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return str(value)


def unit(units):
    """The unit of a `<quantity>-<unit>` designator ('torque-Nm' -> 'Nm'); '' when there is none."""
    return units.split("-", 1)[1] if units and "-" in units else ""


def quantity_kind(units):
    """The quantity of a `<quantity>-<unit>` designator ('torque-Nm' -> 'torque'); '' when there is none."""
    return units.split("-", 1)[0] if units and "-" in units else ""
