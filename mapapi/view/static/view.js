/*
 * mapapi's map page: a client of the API, running in the browser.
 *
 * The key is asked for once and kept in this tab's sessionStorage; it goes
 * in the Authorization header of requests to /api/v1, and nowhere else.
 * Every value of a map reaches the page as text (textContent), never as HTML.
 *
 * A map loads in a few requests: the feed's cursor first (after=latest, so
 * that no change made during the load is missed), then the map, its layers,
 * categories and tags, and all its locations as one GeoJSON export. The page
 * then follows the change feed for that map at a pace the account's rate
 * limit allows (nextDelay), and stops while the tab is hidden.
 *
 * A map of more than DRAWN_ONE_BY_ONE_UP_TO locations is drawn by clusters
 * instead: the API groups the locations of the viewport (and some room
 * around it) by 64-pixel cells, the page draws a disc per cluster and a
 * marker per lone location, and asks again when the view settles
 * somewhere it has not read. Layer switches and the search are the API's
 * filters there. Its feed and viewport requests share one allowance
 * (pace): at most PACE_BURST at once, then PACE_PER_HOUR an hour, so that
 * no hour holds 600 of them however the view moves.
 */
(function () {
  "use strict";

  const API = "/api/v1";
  const KEY_ITEM = "mapapi.view.key";
  /** Seconds between two reads of the feed: 900 an hour at most, under the default 1000. */
  const POLL_SECONDS = 4;
  /** The share of the rate limit left to the account's other clients. */
  const RESERVE_SHARE = 0.1;
  const MAX_WAIT_SECONDS = 300;
  /** Up to this many locations, markers are SVG elements; above, drawn on one canvas. */
  const SVG_MARKERS_UP_TO = 2000;
  /** Pages of events read in a row; a longer burst of changes reloads the map instead. */
  const CATCH_UP_PAGES = 5;
  const FEED_PAGE = 100;
  const LIST_PAGE = 100;
  /** Maps listed in the chooser at most; `#map=<id>` opens any other. */
  const MAP_PAGES = 10;
  const SEARCH_DELAY_MS = 300;
  /** Maps up to this size are read whole and drawn one marker a location; larger ones by clusters. */
  const DRAWN_ONE_BY_ONE_UP_TO = 5000;
  /** The clustered page's feed reads at most this often: a viewport answer shows the changes too. */
  const CLUSTER_POLL_SECONDS = 12;
  /** The clustered page's requests (feed and viewport): a burst, then this many an hour. */
  const PACE_BURST = 30;
  const PACE_PER_HOUR = 560;
  /** The view must rest this long before its clusters are asked for. */
  const SETTLE_MS = 200;
  /** Room read around the view on each side, as a share of its size, so a small pan asks nothing. */
  const VIEW_ROOM = 0.4;
  /** The API's most cells (64 pixels at the zoom) in one clusters request. */
  const MAX_CELLS = 2000;
  const LAYER_FILTERS_MAX = 10;
  const DEFAULT_COLOR = "#6B7280";
  const COLOR = /^#[0-9A-Fa-f]{6}$/;
  const MAP_LINK = /^#map=([A-Za-z0-9_-]{1,100})$/;

  const page = document.body;
  const byId = (id) => document.getElementById(id);
  const keyForm = byId("key-form");
  const keyInput = byId("key-input");
  const chooser = byId("chooser");
  const mapSelect = byId("maps");
  const searchInput = byId("search");
  const forgetButton = byId("forget");

  // ---- plain DOM, text only ------------------------------------------------

  function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function say(text) {
    const message = byId("message");
    message.textContent = text;
    message.hidden = !text;
  }

  function plural(count, word) {
    return `${count.toLocaleString("en")} ${word}${count === 1 ? "" : "s"}`;
  }

  // ---- the key: this tab's sessionStorage only --------------------------------

  const key = {
    get: () => sessionStorage.getItem(KEY_ITEM),
    set: (value) => sessionStorage.setItem(KEY_ITEM, value),
    forget: () => sessionStorage.removeItem(KEY_ITEM),
  };

  // ---- the API ----------------------------------------------------------------

  /** A refused key (401), or an account that may not use the API (403). */
  class KeyRefused extends Error {}

  class ApiError extends Error {
    constructor(status, code, message, retryAfter) {
      super(message);
      this.status = status;
      this.code = code;
      this.retryAfter = retryAfter;
    }
  }

  /** The account's general bucket, as the last answer's X-RateLimit-* headers told it. */
  const budget = { limit: null, remaining: null, reset: null, skewMs: 0 };

  function noteBudget(headers) {
    const limit = parseInt(headers.get("X-RateLimit-Limit"), 10);
    const remaining = parseInt(headers.get("X-RateLimit-Remaining"), 10);
    const reset = parseInt(headers.get("X-RateLimit-Reset"), 10);
    if ([limit, remaining, reset].every(Number.isFinite)) {
      Object.assign(budget, { limit, remaining, reset });
    }
    // Reset is the server's clock: read it against the server's Date.
    const serverNow = Date.parse(headers.get("Date") || "");
    if (Number.isFinite(serverNow)) budget.skewMs = serverNow - Date.now();
  }

  /** Seconds until the next read of the feed. */
  function nextDelay() {
    const { limit, remaining, reset } = budget;
    if (limit === null) return POLL_SECONDS;
    const reserve = Math.max(1, Math.ceil(limit * RESERVE_SHARE));
    const untilReset = Math.max(1, reset - (Date.now() + budget.skewMs) / 1000);
    if (remaining <= reserve) return Math.min(MAX_WAIT_SECONDS, Math.max(POLL_SECONDS, untilReset));
    if (remaining >= limit / 2) return POLL_SECONDS;
    // Less than half left: spread what is left above the reserve until the reset.
    return Math.min(MAX_WAIT_SECONDS, Math.max(POLL_SECONDS, untilReset / (remaining - reserve)));
  }

  /** GET a path of the API with the key: its parsed JSON body, or an error thrown. */
  async function request(path) {
    const secret = key.get();
    if (!secret) throw new KeyRefused("");
    const response = await fetch(API + path, {
      headers: { Authorization: `Bearer ${secret}` },
      cache: "no-store",
      credentials: "omit",
      redirect: "error",
    });
    noteBudget(response.headers);
    if (response.ok) return response.json();
    let error = {};
    try {
      error = (await response.json()).error || {};
    } catch (_notJson) {
      // not the API's own answer (a proxy's page): the status says enough
    }
    const message = error.message || `The service answered HTTP ${response.status}.`;
    if (response.status === 401 || error.code === "PRO_SUBSCRIPTION_REQUIRED") {
      throw new KeyRefused(message);
    }
    const retryAfter = parseInt(response.headers.get("Retry-After"), 10);
    throw new ApiError(response.status, error.code || "", message, Number.isFinite(retryAfter) ? retryAfter : null);
  }

  async function data(path) {
    return (await request(path)).data;
  }

  /** Every item of a paged list, page after page (at most ``maxPages``). */
  async function listAll(path, plural, maxPages = Infinity) {
    const items = [];
    for (let number = 1; number <= maxPages; number += 1) {
      const list = await data(`${path}?page=${number}&pageSize=${LIST_PAGE}`);
      items.push(...list[plural]);
      if (number >= list.pagination.totalPages) break;
    }
    return items;
  }

  // ---- what the page holds ------------------------------------------------------

  const state = {
    /** Bumped whenever the map shown changes: answers meant for another are dropped. */
    generation: 0,
    mapId: null,
    map: null,
    layers: new Map(),
    categories: new Map(),
    tags: new Map(),
    locations: new Map(),
    markers: new Map(),
    hiddenLayers: new Set(),
    /** Ids matching the search, or null when there is none. */
    matches: null,
    query: "",
    cursor: null,
    popupId: null,
    renderer: null,
    /** The next scheduled step ({action, at, limited}), and its timer. */
    next: null,
    timer: null,
    failures: 0,
    /** Whether the map is drawn by clusters, and its locations in all (the API's total). */
    clustered: false,
    total: 0,
    /** The clusters read last: for which box, zoom and filters, and whether a change made them old. */
    read: null,
    stale: false,
    viewTimer: null,
    viewNumber: 0,
    /** The read under way: its zoom, filters and box. */
    pending: null,
  };

  // ---- the clustered page's allowance: a token bucket --------------------------------

  const pace = {
    tokens: PACE_BURST,
    at: Date.now(),
    /** The times of the requests made under it this last hour: shown on the page (data-paced). */
    spent: [],
    refill() {
      const now = Date.now();
      this.tokens = Math.min(PACE_BURST, this.tokens + ((now - this.at) / 3_600_000) * PACE_PER_HOUR);
      this.at = now;
      while (this.spent.length && this.spent[0] <= now - 3_600_000) this.spent.shift();
    },
    /** Milliseconds until a request may be made (0: now, and it is counted). */
    take() {
      this.refill();
      if (this.tokens < 1) return Math.ceil(((1 - this.tokens) * 3_600_000) / PACE_PER_HOUR);
      this.tokens -= 1;
      this.spent.push(Date.now());
      page.dataset.paced = String(this.spent.length);
      return 0;
    },
  };

  function fromFeature(feature) {
    const properties = feature.properties;
    return {
      id: feature.id,
      lng: feature.geometry.coordinates[0],
      lat: feature.geometry.coordinates[1],
      name: properties.name,
      description: properties.description || "",
      address: properties.address || "",
      categoryId: properties.categoryId,
      tagIds: properties.tagIds || [],
      layerIds: properties.layerIds || [],
      properties: properties.properties || {},
      updatedAt: properties.updatedAt,
    };
  }

  function fromResource(location) {
    return {
      id: location.id,
      lng: location.lng,
      lat: location.lat,
      name: location.name,
      description: location.description || "",
      address: location.address || "",
      categoryId: location.categoryId,
      tagIds: location.tagIds || [],
      layerIds: (location.layers || []).map((layer) => layer.id),
      properties: location.properties || {},
      updatedAt: location.updatedAt,
    };
  }

  function byOrder(a, b) {
    return a.order - b.order;
  }

  /** The colour of a location: its first layer's, else its category's, else the default. */
  function colorOf(loc) {
    const layers = loc.layerIds.map((id) => state.layers.get(id)).filter(Boolean).sort(byOrder);
    if (layers.length && COLOR.test(layers[0].color)) return layers[0].color;
    const category = state.categories.get(loc.categoryId);
    if (category && COLOR.test(category.color || "")) return category.color;
    return DEFAULT_COLOR;
  }

  /**
   * A location is shown when it matches the search and is on no layer or on
   * a layer switched on: the API's layerId filter with the layers on and
   * `none`. Clusters come filtered by the API itself.
   */
  function isShown(loc) {
    if (state.clustered) return true;
    if (state.matches !== null && !state.matches.has(loc.id)) return false;
    return !loc.layerIds.length || loc.layerIds.some((id) => !state.hiddenLayers.has(id));
  }

  /** The rule of the API's `q`, for locations that change while a search is shown. */
  function matchesQuery(loc) {
    const query = state.query.toLowerCase();
    return [loc.name, loc.description, loc.address].some((text) => text.toLowerCase().includes(query));
  }

  // ---- the map --------------------------------------------------------------------

  // No inertia: a drag ends where it is let go, so the view settles (and is read) at once.
  const leafletMap = L.map("map", { maxZoom: 19, worldCopyJump: true, inertia: false }).setView([20, 0], 2);
  const svgRenderer = L.svg();
  const canvasRenderer = L.canvas({ padding: 0.5 });
  const markerLayer = L.featureGroup().addTo(leafletMap);
  const clusterLayer = L.featureGroup().addTo(leafletMap);
  const popup = L.popup({ maxWidth: 320, autoPanPadding: [24, 24] });

  if (page.dataset.tiles) {
    const credit = element("a", null, page.dataset.attribution);
    credit.href = page.dataset.attributionUrl;
    // Serialized by the browser, so the setting's text arrives escaped.
    L.tileLayer(page.dataset.tiles, { maxZoom: 19, attribution: `&copy; ${credit.outerHTML}` }).addTo(leafletMap);
  }

  markerLayer.on("layeradd", (event) => {
    const path = event.layer.getElement && event.layer.getElement();
    if (path) path.setAttribute("data-location-id", event.layer.locationId);
  });
  markerLayer.on("click", (event) => openPopup((event.propagatedFrom || event.layer).locationId));
  leafletMap.on("popupclose", (event) => {
    if (event.popup === popup) state.popupId = null;
  });

  function placeMarker(loc) {
    let marker = state.markers.get(loc.id);
    if (marker) {
      marker.setLatLng([loc.lat, loc.lng]);
      marker.setStyle({ fillColor: colorOf(loc) });
    } else {
      marker = L.circleMarker([loc.lat, loc.lng], {
        renderer: state.renderer,
        className: "location-marker",
        radius: 6,
        weight: 1.5,
        color: "#FFFFFF",
        opacity: 1,
        fillColor: colorOf(loc),
        fillOpacity: 0.9,
      });
      marker.locationId = loc.id;
      state.markers.set(loc.id, marker);
    }
    showOrHide(marker, loc);
  }

  function showOrHide(marker, loc) {
    const wanted = isShown(loc);
    if (wanted !== markerLayer.hasLayer(marker)) {
      if (wanted) markerLayer.addLayer(marker);
      else markerLayer.removeLayer(marker);
    }
  }

  function refreshMarkers(recolour) {
    for (const [id, loc] of state.locations) {
      const marker = state.markers.get(id);
      if (recolour) marker.setStyle({ fillColor: colorOf(loc) });
      showOrHide(marker, loc);
    }
    const opened = state.popupId === null ? undefined : state.markers.get(state.popupId);
    if (opened !== undefined && !markerLayer.hasLayer(opened)) leafletMap.closePopup(popup);
    showCount();
  }

  /** Fit the view to the locations shown (read from the data, so it can precede the markers). */
  function fitToShown() {
    const shown = [...state.locations.values()].filter(isShown).map((loc) => [loc.lat, loc.lng]);
    if (shown.length) {
      leafletMap.fitBounds(L.latLngBounds(shown), { padding: [30, 30], maxZoom: 16, animate: false });
    } else if (state.map && state.map.centerLat !== null && state.map.centerLng !== null) {
      leafletMap.setView([state.map.centerLat, state.map.centerLng], state.map.zoom ?? 10, { animate: false });
    }
  }

  // ---- the popup, the layer switches, the count ------------------------------------

  function fact(list, label, className, value) {
    if (!value) return;
    const description = element("dd", className);
    description.append(value);
    list.append(element("dt", null, label), description);
  }

  function popupContent(loc) {
    const box = element("div", "location-popup");
    box.dataset.locationId = loc.id;
    box.append(element("h2", "name", loc.name));
    if (loc.description) box.append(element("p", "description", loc.description));
    const facts = element("dl");
    fact(facts, "Address", "address", loc.address);
    const category = state.categories.get(loc.categoryId);
    fact(facts, "Category", "category", category ? category.name : "");
    const tags = loc.tagIds.map((id) => state.tags.get(id)).filter(Boolean);
    if (tags.length) {
      const list = element("ul", "tag-list");
      list.append(...tags.map((tag) => element("li", null, tag.name)));
      fact(facts, "Tags", "tags", list);
    }
    const layers = loc.layerIds.map((id) => state.layers.get(id)).filter(Boolean).sort(byOrder);
    fact(facts, "Layers", "layers", layers.map((layer) => layer.name).join(", "));
    if (facts.childElementCount) box.append(facts);
    const own = Object.entries(loc.properties || {});
    if (own.length) {
      const list = element("dl", "properties");
      for (const [name, value] of own) {
        list.append(element("dt", null, name), element("dd", null, propertyText(value)));
      }
      box.append(list);
    }
    return box;
  }

  /** A value of `properties` as text: strings as they are, anything else as indented JSON. */
  function propertyText(value) {
    return typeof value === "string" ? value : JSON.stringify(value, null, 2);
  }

  function openPopup(id) {
    const loc = state.locations.get(id);
    if (!loc) return;
    state.popupId = id;
    popup.setLatLng([loc.lat, loc.lng]).setContent(popupContent(loc)).openOn(leafletMap);
  }

  function refreshPopup() {
    if (state.popupId === null) return;
    const loc = state.locations.get(state.popupId);
    if (loc) popup.setLatLng([loc.lat, loc.lng]).setContent(popupContent(loc));
    else leafletMap.closePopup(popup);
  }

  function drawLayerSwitches() {
    const layers = [...state.layers.values()].sort(byOrder);
    const counts = new Map();
    for (const loc of state.locations.values()) {
      for (const id of loc.layerIds) counts.set(id, (counts.get(id) || 0) + 1);
    }
    const items = layers.map((layer) => {
      const toggle = element("input");
      toggle.type = "checkbox";
      toggle.checked = !state.hiddenLayers.has(layer.id);
      toggle.dataset.layerId = layer.id;
      toggle.addEventListener("change", () => {
        if (toggle.checked) state.hiddenLayers.delete(layer.id);
        else state.hiddenLayers.add(layer.id);
        if (state.clustered) readView(true);
        else refreshMarkers(false);
      });
      const swatch = element("span", "swatch");
      swatch.style.backgroundColor = COLOR.test(layer.color) ? layer.color : DEFAULT_COLOR;
      const label = element("label");
      label.append(toggle, swatch, element("span", "layer-name", layer.name));
      // A clustered map's layers are not counted: the page holds only the viewport.
      if (!state.clustered) {
        label.append(element("span", "layer-count", (counts.get(layer.id) || 0).toLocaleString("en")));
      }
      const item = element("li");
      item.append(label);
      return item;
    });
    byId("layer-list").replaceChildren(...items);
    byId("layers").hidden = layers.length === 0;
  }

  function showCount() {
    const count = byId("count");
    if (state.mapId === null) {
      count.textContent = "";
      delete count.dataset.shown;
      delete count.dataset.total;
      return;
    }
    let shown = markerLayer.getLayers().length;
    let total = state.locations.size;
    if (state.clustered) {
      shown = state.read ? state.read.total : 0;
      total = state.total;
      count.dataset.shown = String(shown);
      count.dataset.total = String(total);
      count.textContent = `${plural(total, "location")}; ${shown.toLocaleString("en")} around this view`;
      return;
    }
    count.dataset.shown = String(shown);
    count.dataset.total = String(total);
    count.textContent = shown === total
      ? plural(total, "location")
      : `Showing ${shown.toLocaleString("en")} of ${plural(total, "location")}`;
  }

  function showLive(kind, seconds) {
    const live = byId("live");
    const clock = (date) => date.toLocaleTimeString("en-GB");
    const next = new Date(Date.now() + (seconds || 0) * 1000);
    const texts = {
      live: "Following changes",
      paused: "Paused while this tab is hidden",
      waiting: `Rate limit reached: next check at ${clock(next)}`,
      error: `The service did not answer: trying again at ${clock(next)}`,
      off: "",
    };
    live.dataset.state = kind;
    live.textContent = texts[kind];
    live.title = kind === "live" ? `Last checked at ${clock(new Date())}` : "";
    if (seconds === undefined) delete live.dataset.next;
    else live.dataset.next = String(next.getTime());
  }

  function showMapTitle(map) {
    state.map = map;
    document.title = `${map.title} — mapapi`;
    let option = [...mapSelect.options].find((item) => item.value === map.id);
    if (!option) {
      option = new Option(map.title, map.id);
      mapSelect.append(option);
    }
    option.text = map.title;
    mapSelect.value = map.id;
  }

  // ---- a big map: the viewport's clusters, read from the API ------------------------

  /** The cell (x, y) of a point at ``zoom``, as the API cuts the world: 64-pixel cells. */
  function cellOf(lat, lng, zoom) {
    const side = 2 ** (zoom + 2);
    const x = lng >= 180 ? side - 1 : Math.floor(((lng + 180) / 360) * side);
    const limit = 85.05112877;
    if (lat >= limit) return [x, 0];
    if (lat <= -limit) return [x, side - 1];
    const phi = (lat * Math.PI) / 180;
    return [x, Math.floor(((1 - Math.log(Math.tan(phi) + 1 / Math.cos(phi)) / Math.PI) / 2) * side)];
  }

  function cellsIn([west, south, east, north], zoom) {
    const side = 2 ** (zoom + 2);
    const [xWest, yNorth] = cellOf(north, west, zoom);
    const [xEast, ySouth] = cellOf(south, east, zoom);
    const columns = west <= east ? xEast - xWest + 1 : side - xWest + xEast + 1;
    return Math.min(columns, side) * (ySouth - yNorth + 1);
  }

  /** A longitude of Leaflet's (any number of turns round) within -180..180. */
  function wrapped(lng) {
    const turned = ((((lng + 180) % 360) + 360) % 360) - 180;
    return turned === -180 && lng > 0 ? 180 : turned;
  }

  const degrees = (value) => Math.round(value * 1e6) / 1e6;

  /** The view and some room around it, as a box the API takes (west > east across the antimeridian). */
  function boxAround(bounds, zoom) {
    for (const room of [VIEW_ROOM, VIEW_ROOM / 2, 0]) {
      const padded = bounds.pad(room);
      let west = padded.getWest();
      let east = padded.getEast();
      if (east - west >= 360) {
        west = -180;
        east = 180;
      } else {
        west = degrees(wrapped(west));
        east = degrees(wrapped(east));
      }
      const box = [west, degrees(Math.max(-90, padded.getSouth())), east, degrees(Math.min(90, padded.getNorth()))];
      if (cellsIn(box, zoom) <= MAX_CELLS) return { box, padded };
    }
    return null;
  }

  /** The filters of the switches and the search, as the API's query. */
  function filterQuery() {
    let query = state.query ? `&q=${encodeURIComponent(state.query)}` : "";
    const shown = [...state.layers.keys()].filter((id) => !state.hiddenLayers.has(id));
    // Ten layerIds at most: with more layers on, every layer is shown (docs/decisions.md).
    if (shown.length < state.layers.size && shown.length < LAYER_FILTERS_MAX) {
      for (const id of [...shown, "none"]) query += `&layerId=${encodeURIComponent(id)}`;
    }
    return query;
  }

  function viewZoom() {
    return Math.max(0, Math.min(22, Math.round(leafletMap.getZoom())));
  }

  /** Whether a read (done or under way) holds the whole view as it is. */
  function covers(read, zoom, filters) {
    return read !== null && read.zoom === zoom && read.filters === filters && read.padded.contains(leafletMap.getBounds());
  }

  /** Read the view's clusters once it settles (at once with ``now``); nothing if they are read. */
  function readView(now = false) {
    clearTimeout(state.viewTimer);
    if (state.clustered) state.viewTimer = setTimeout(viewport, now ? 0 : SETTLE_MS);
  }

  async function viewport() {
    if (!state.clustered || state.mapId === null) return;
    const zoom = viewZoom();
    const filters = filterQuery();
    if (!state.stale && (covers(state.read, zoom, filters) || covers(state.pending, zoom, filters))) return;
    const around = boxAround(leafletMap.getBounds(), zoom);
    if (around === null) {
      say("This window shows more than the service draws at once: zoom in.");
      return;
    }
    const wait = pace.take();
    if (wait > 0) {
      state.viewTimer = setTimeout(viewport, wait);
      return;
    }
    const generation = state.generation;
    const number = (state.viewNumber += 1);
    const read = { zoom, filters, padded: around.padded };
    state.pending = read;
    state.stale = false;
    try {
      const path = `/maps/${state.mapId}/locations/clusters?bbox=${around.box.join(",")}&zoom=${zoom}${filters}`;
      const answer = await data(path);
      if (number !== state.viewNumber || generation !== state.generation) return;
      state.pending = null;
      state.read = { ...read, total: answer.total };
      drawClusters(answer);
    } catch (error) {
      if (number !== state.viewNumber || generation !== state.generation) return;
      state.pending = null;
      state.stale = true;
      if (error instanceof KeyRefused) askForKey(error.message);
      else if (error instanceof ApiError && error.status === 429) {
        state.viewTimer = setTimeout(viewport, Math.max(1, error.retryAfter || 1) * 1000);
      } else say(error.message);
    }
  }

  /** A cluster's label: its exact count below 1,000, then rounded (12.3k, 1.2M). */
  function countLabel(count) {
    if (count < 1000) return String(count);
    if (count < 999_500) return `${(count / 1000).toFixed(count < 9_950 ? 1 : 0)}k`;
    return `${(count / 1_000_000).toFixed(1)}M`;
  }

  function disc(cluster) {
    const size = Math.round(26 + 10 * Math.log10(cluster.count));
    const icon = L.divIcon({
      html: element("span", "cluster-count", countLabel(cluster.count)),
      className: "cluster",
      iconSize: [size, size],
    });
    const marker = L.marker([cluster.lat, cluster.lng], { icon, title: plural(cluster.count, "location") });
    marker.on("add", () => {
      const node = marker.getElement();
      node.dataset.count = String(cluster.count);
      node.dataset.bbox = cluster.bbox.join(",");
    });
    marker.on("click", () => zoomTo(cluster.bbox));
    return marker;
  }

  /** Show a cluster's box; locations all on one spot are shown two zooms closer. */
  function zoomTo([west, south, east, north]) {
    const bounds = L.latLngBounds([south, west], [north, east]);
    const zoom = leafletMap.getBoundsZoom(bounds, false, L.point(80, 80));
    if (zoom > leafletMap.getZoom()) leafletMap.fitBounds(bounds, { padding: [40, 40] });
    else leafletMap.setView(bounds.getCenter(), Math.min(leafletMap.getMaxZoom(), leafletMap.getZoom() + 2));
  }

  function drawClusters(answer) {
    clusterLayer.clearLayers();
    markerLayer.clearLayers();
    state.markers = new Map();
    state.locations = new Map(answer.locations.map((location) => [location.id, fromResource(location)]));
    for (const loc of state.locations.values()) placeMarker(loc);
    clusterLayer.addLayer(L.layerGroup(answer.clusters.map(disc)));
    page.dataset.clusters = String(answer.clusters.length);
    refreshPopup();
    showCount();
    // After the renderer's own frame: the view is on screen (what a test or a benchmark waits for).
    requestAnimationFrame(() => performance.mark("mapapi-view-redrawn"));
  }

  /** Fit the view to a world-wide answer's clusters and locations. */
  function fitToAnswer(answer) {
    const corners = [];
    for (const cluster of answer.clusters) {
      corners.push([cluster.bbox[1], cluster.bbox[0]], [cluster.bbox[3], cluster.bbox[2]]);
    }
    for (const location of answer.locations) corners.push([location.lat, location.lng]);
    if (corners.length) {
      leafletMap.fitBounds(L.latLngBounds(corners), { padding: [30, 30], maxZoom: 16, animate: false });
    } else if (state.map && state.map.centerLat !== null && state.map.centerLng !== null) {
      leafletMap.setView([state.map.centerLat, state.map.centerLng], state.map.zoom ?? 10, { animate: false });
    }
  }

  /** The world's clusters under the filters: where to look (the map's load, a search). */
  function overviewPath(mapId, filters = "") {
    return `/maps/${mapId}/locations/clusters?bbox=-180,-90,180,90&zoom=2${filters}`;
  }

  leafletMap.on("moveend", () => readView());

  // ---- scheduling: one next step at a time, none while the tab is hidden ------------

  function later(action, seconds, limited = false) {
    state.next = { action, at: Date.now() + seconds * 1000, limited };
    arm();
  }

  function arm() {
    clearTimeout(state.timer);
    state.timer = null;
    if (state.next === null) return;
    if (document.hidden) {
      showLive("paused");
      return;
    }
    if (byId("live").dataset.state === "paused") {
      if (state.next.limited) showLive("waiting", (state.next.at - Date.now()) / 1000);
      else showLive("live");
    }
    state.timer = setTimeout(() => {
      const { action } = state.next;
      state.next = null;
      action();
    }, Math.max(0, state.next.at - Date.now()));
  }

  function stopFollowing() {
    state.next = null;
    arm();
  }

  document.addEventListener("visibilitychange", () => {
    // Back in view: read the feed at once, unless the rate limit asked to wait.
    if (!document.hidden && state.next !== null && !state.next.limited) state.next.at = Date.now();
    arm();
  });

  /** Wait for an error: Retry-After on a 429 (and longer each time), a growing pause otherwise. */
  function failed(error, retry) {
    if (error instanceof KeyRefused) {
      askForKey(error.message);
      return;
    }
    if (error instanceof ApiError && error.code === "CURSOR_EXPIRED" && state.mapId !== null) {
      loadMap(state.mapId);
      return;
    }
    state.failures += 1;
    const growing = Math.min(MAX_WAIT_SECONDS, POLL_SECONDS * 2 ** (state.failures - 1));
    if (error instanceof ApiError && error.status === 429) {
      const seconds = Math.max(error.retryAfter || 1, growing);
      showLive("waiting", seconds);
      later(retry, seconds, true);
      return;
    }
    if (error instanceof ApiError && error.status < 500) {
      say(error.message);
      page.dataset.state = "error";
      return;
    }
    const seconds = Math.min(60, growing);
    showLive("error", seconds);
    later(retry, seconds);
  }

  // ---- following the feed --------------------------------------------------------------

  /** Read the feed from the cursor; more pages at once when there are, up to CATCH_UP_PAGES. */
  async function poll() {
    if (state.mapId === null) return;
    const generation = state.generation;
    const mapId = state.mapId;
    let reload = false;
    try {
      for (let pages = 1; ; pages += 1) {
        const wait = state.clustered ? pace.take() : 0;
        if (wait > 0) {
          later(poll, wait / 1000, true);
          return;
        }
        const after = state.cursor === null ? "" : `&after=${encodeURIComponent(state.cursor)}`;
        const feed = await data(`/events?mapId=${mapId}&limit=${FEED_PAGE}${after}`);
        if (generation !== state.generation) return;
        applyEvents(feed.events);
        if (generation !== state.generation) return; // the map was deleted
        state.cursor = feed.next;
        if (!feed.hasMore) break;
        if (pages === CATCH_UP_PAGES) {
          reload = true;
          break;
        }
      }
      state.failures = 0;
    } catch (error) {
      if (generation === state.generation) failed(error, poll);
      return;
    }
    if (reload) {
      loadMap(mapId);
    } else {
      showLive("live");
      later(poll, followDelay());
    }
  }

  function followDelay() {
    return state.clustered ? Math.max(CLUSTER_POLL_SECONDS, nextDelay()) : nextDelay();
  }

  /** Whether ``incoming`` is older than what the page holds (an event replayed after a load). */
  function isStale(held, incoming) {
    return held !== undefined && incoming.updatedAt < held.updatedAt;
  }

  function keep(collection, item) {
    if (!isStale(collection.get(item.id), item)) collection.set(item.id, item);
  }

  function applyEvents(events) {
    let recolour = false;
    let switches = false;
    for (const event of events) {
      const [resource, action] = event.type.split(".");
      const item = event.data;
      if (resource === "location" && state.clustered) {
        // The next read of the view shows it, in a count or as a marker.
        state.stale = true;
        state.total += { created: 1, deleted: -1 }[action] || 0;
      } else if (resource === "location") {
        switches = true;
        if (action === "deleted") removeLocation(item.id);
        else putLocation(fromResource(item));
      } else if (resource === "layer" || resource === "category" || resource === "tag") {
        const collection = { layer: state.layers, category: state.categories, tag: state.tags }[resource];
        if (action === "deleted") collection.delete(item.id);
        else keep(collection, item);
        recolour = recolour || resource !== "tag";
        switches = switches || resource === "layer";
      } else if (resource === "map") {
        if (action === "deleted") {
          mapDeleted();
          return;
        }
        showMapTitle(item);
      }
    }
    if (recolour) refreshMarkers(true);
    if (switches) drawLayerSwitches();
    if (state.clustered && state.stale) readView(true);
    showCount();
    refreshPopup();
  }

  function putLocation(loc) {
    const held = state.locations.get(loc.id);
    if (isStale(held, loc)) return;
    state.locations.set(loc.id, loc);
    if (state.matches !== null) {
      if (matchesQuery(loc)) state.matches.add(loc.id);
      else state.matches.delete(loc.id);
    }
    placeMarker(loc);
  }

  function removeLocation(id) {
    const marker = state.markers.get(id);
    if (marker) markerLayer.removeLayer(marker);
    state.markers.delete(id);
    state.locations.delete(id);
    if (state.matches !== null) state.matches.delete(id);
  }

  // ---- loading a map ------------------------------------------------------------------------

  function clearMap() {
    state.generation += 1;
    stopFollowing();
    leafletMap.closePopup(popup);
    markerLayer.clearLayers();
    clusterLayer.clearLayers();
    clearTimeout(state.viewTimer);
    state.clustered = false;
    state.read = null;
    state.pending = null;
    state.stale = false;
    state.markers = new Map();
    state.locations = new Map();
    state.layers = new Map();
    state.categories = new Map();
    state.tags = new Map();
    state.mapId = null;
    state.map = null;
    state.cursor = null;
    drawLayerSwitches();
    showCount();
    showLive("off");
  }

  async function loadMap(mapId) {
    const sameMap = mapId === state.mapId;
    const hidden = sameMap ? state.hiddenLayers : new Set();
    clearMap();
    const generation = state.generation;
    state.hiddenLayers = hidden;
    if (!sameMap) {
      searchInput.value = "";
      state.query = "";
      state.matches = null;
    }
    page.dataset.state = "loading";
    say("");
    byId("count").textContent = "Loading…";
    try {
      // The cursor before the snapshot: a change made meanwhile is read again, never missed.
      const start = await data(`/events?after=latest&mapId=${mapId}`);
      const base = `/maps/${mapId}`;
      const [map, layers, categories, tags, overview] = await Promise.all([
        data(base),
        listAll(`${base}/layers`, "layers"),
        listAll(`${base}/categories`, "categories"),
        listAll(`${base}/tags`, "tags"),
        data(overviewPath(mapId)),
      ]);
      const clustered = overview.total > DRAWN_ONE_BY_ONE_UP_TO;
      const collection = clustered ? null : await request(`${base}/locations.geojson`);
      if (generation !== state.generation) return;
      state.mapId = mapId;
      state.cursor = start.next;
      state.layers = new Map(layers.map((layer) => [layer.id, layer]));
      state.categories = new Map(categories.map((category) => [category.id, category]));
      state.tags = new Map(tags.map((tag) => [tag.id, tag]));
      state.clustered = clustered;
      state.total = overview.total;
      showMapTitle(map);
      if (clustered) {
        state.renderer = svgRenderer;
        fitToAnswer(overview);
        drawLayerSwitches();
        await viewport();
        if (generation !== state.generation) return;
      } else {
        state.locations = new Map(collection.features.map((feature) => [feature.id, fromFeature(feature)]));
        state.renderer = state.locations.size > SVG_MARKERS_UP_TO ? canvasRenderer : svgRenderer;
        fitToShown(); // first: each marker is then placed once, in the final view
        for (const loc of state.locations.values()) placeMarker(loc);
        drawLayerSwitches();
      }
      showCount();
      state.failures = 0;
      page.dataset.state = "ready";
      // After the renderer's own frame: the markers are on screen.
      requestAnimationFrame(() => performance.mark("mapapi-view-drawn"));
      showLive("live");
      later(poll, followDelay());
      if (searchInput.value.trim()) search();
    } catch (error) {
      if (generation !== state.generation) return;
      if (error instanceof ApiError && error.status === 404) {
        say("There is no such map in this account.");
        page.dataset.state = "choose";
        byId("count").textContent = "";
        return;
      }
      failed(error, () => loadMap(mapId));
    }
  }

  function mapDeleted() {
    const option = [...mapSelect.options].find((item) => item.value === state.mapId);
    if (option) option.remove();
    clearMap();
    say("This map has been deleted.");
    page.dataset.state = "choose";
    history.replaceState(null, "", window.location.pathname);
    mapSelect.value = "";
  }

  // ---- the search: the API's q ------------------------------------------------------

  let searchTimer = null;
  let searchNumber = 0;

  async function search() {
    clearTimeout(searchTimer);
    const query = searchInput.value.trim();
    const number = (searchNumber += 1);
    const generation = state.generation;
    if (state.mapId === null) return;
    if (state.clustered) {
      searchClusters(query, number, generation);
      return;
    }
    if (!query) {
      state.query = "";
      state.matches = null;
      refreshMarkers(false);
      fitToShown();
      return;
    }
    try {
      const found = await request(`/maps/${state.mapId}/locations.geojson?q=${encodeURIComponent(query)}`);
      if (number !== searchNumber || generation !== state.generation) return;
      state.query = query;
      state.matches = new Set(found.features.map((feature) => feature.id));
      refreshMarkers(false);
      fitToShown();
    } catch (error) {
      if (error instanceof KeyRefused) askForKey(error.message);
      else say(error.message);
    }
  }

  /** A big map's search: the view moved to where the matches are, and read with q. */
  async function searchClusters(query, number, generation) {
    state.query = query;
    if (query) {
      const wait = pace.take();
      if (wait > 0) {
        searchTimer = setTimeout(search, wait);
        return;
      }
      try {
        const found = await data(overviewPath(state.mapId, filterQuery()));
        if (number !== searchNumber || generation !== state.generation) return;
        fitToAnswer(found);
      } catch (error) {
        if (error instanceof KeyRefused) askForKey(error.message);
        else say(error.message);
        return;
      }
    }
    readView(true);
  }

  searchInput.addEventListener("input", () => {
    clearTimeout(searchTimer);
    searchTimer = setTimeout(search, SEARCH_DELAY_MS);
  });
  searchInput.addEventListener("keydown", (event) => {
    if (event.key === "Enter") search();
  });

  // ---- choosing a map: #map=<id> -----------------------------------------------------

  function linkedMapId() {
    const match = MAP_LINK.exec(window.location.hash);
    return match ? match[1] : null;
  }

  function route() {
    if (!key.get()) return;
    const mapId = linkedMapId();
    if (mapId === null) {
      clearMap();
      mapSelect.value = "";
      page.dataset.state = "choose";
      if (window.location.hash.length > 1) say("This link names no map.");
    } else if (mapId !== state.mapId) {
      loadMap(mapId);
    }
  }

  mapSelect.addEventListener("change", () => {
    window.location.hash = mapSelect.value ? `map=${mapSelect.value}` : "";
  });
  window.addEventListener("hashchange", route);

  async function listMaps() {
    try {
      const maps = await listAll("/maps", "maps", MAP_PAGES);
      const chosen = state.map;
      mapSelect.replaceChildren(new Option("Choose a map…", ""), ...maps.map((map) => new Option(map.title, map.id)));
      if (chosen) showMapTitle(chosen);
    } catch (error) {
      // The map shown, if any, follows on; the list stays as it was.
      if (error instanceof KeyRefused) askForKey(error.message);
      else say(`The maps could not be listed: ${error.message}`);
    }
  }

  // ---- the key prompt -----------------------------------------------------------------

  function askForKey(message) {
    key.forget();
    clearMap();
    keyForm.hidden = false;
    chooser.hidden = true;
    forgetButton.hidden = true;
    say(message ? `The key was refused: ${message}` : "");
    page.dataset.state = "key";
    keyInput.focus();
  }

  function start() {
    keyForm.hidden = true;
    chooser.hidden = false;
    forgetButton.hidden = false;
    say("");
    page.dataset.state = "choose";
    listMaps();
    route();
  }

  keyForm.addEventListener("submit", (event) => {
    event.preventDefault();
    const typed = keyInput.value.trim();
    keyInput.value = "";
    if (!typed) return;
    key.set(typed);
    start();
  });

  forgetButton.addEventListener("click", () => askForKey(""));

  if (key.get()) start();
  else askForKey("");
})();
