"""The kinds of object the service keeps (CONTRACT 3), as every layer names them: the plural is the kind (a folder of the
archive, a history page's URL, the stores' `kind`), the singular its GraphQL and command-line word."""

STATIONS, PROCESSES, PRODUCTS = "stations", "processes", "products"
# In the order objects are applied: a process may name stations' media, a product names processes.
KINDS = (STATIONS, PROCESSES, PRODUCTS)
SINGULAR = {STATIONS: "station", PROCESSES: "process", PRODUCTS: "product"}
