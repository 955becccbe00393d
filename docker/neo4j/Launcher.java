import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.connectors.HttpConnector;
import org.neo4j.configuration.connectors.HttpsConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.io.ByteUnit;

/**
 * Embedded Neo4j 5.26 with Bolt on 127.0.0.1:PORT and auth off, for gnnstore's test suite.
 *
 * <p>Run in source-file mode: {@code java -cp 'lib/*' Launcher.java PORT DATA_HOME [PAGECACHE_MB]}.
 * Prints {@code NEO4J_READY <port>} once the default database answers; SIGTERM shuts down cleanly.
 */
public class Launcher {
  public static void main(String[] args) throws Exception {
    if (args.length < 2 || args.length > 3) {
      System.err.println("usage: Launcher PORT DATA_HOME [PAGECACHE_MB]");
      System.exit(2);
    }
    int port = Integer.parseInt(args[0]);
    Path home = Path.of(args[1]).toAbsolutePath();
    long pageCacheMb = args.length == 3 ? Long.parseLong(args[2]) : 128;
    DatabaseManagementService dbms = new DatabaseManagementServiceBuilder(home)
        .setConfig(BoltConnector.enabled, true)
        .setConfig(BoltConnector.listen_address, new SocketAddress("127.0.0.1", port))
        .setConfig(HttpConnector.enabled, false)
        .setConfig(HttpsConnector.enabled, false)
        .setConfig(GraphDatabaseSettings.auth_enabled, false)
        .setConfig(GraphDatabaseSettings.pagecache_memory, ByteUnit.mebiBytes(pageCacheMb))
        // Bolt's Netty loops otherwise wait 2 x 5 s of quiet before a test session can end.
        .setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_quiet_period, 0)
        .setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_timeout, Duration.ofSeconds(5))
        .build();
    CountDownLatch stopped = new CountDownLatch(1);
    Runtime.getRuntime().addShutdownHook(new Thread(() -> {
      dbms.shutdown();
      stopped.countDown();
    }, "neo4j-shutdown"));
    dbms.database(GraphDatabaseSettings.DEFAULT_DATABASE_NAME).executeTransactionally("RETURN 1");
    System.out.println("NEO4J_READY " + port);
    System.out.flush();
    stopped.await();
  }
}
